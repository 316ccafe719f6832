"""checkpoint.py: checksummed atomic checkpoints, the run-directory lock, resume checks;
files.atomic_write."""

import errno
import os

import pytest
import torch

from support import checkpoint
from support import files
from train import parse_args


@pytest.mark.parametrize("damage", ["truncate", "flip", "empty", "foreign", "missing"])
def test_a_damaged_or_missing_checkpoint_is_one_clear_error(tmp_path, damage):
    path = str(tmp_path / "ckpt.pt")
    checkpoint.save_checkpoint(path, {"model": {"w": torch.randn(100, 100)}})
    blob, k = open(path, "rb").read(), os.path.getsize(path) // 2
    os.remove(path)
    damaged = {"truncate": blob[:k], "empty": b"", "foreign": b"PK\x03\x04 this is some other file",
               # flip: one bit in the tensor data, which torch.load alone accepts
               "flip": blob[:k] + bytes([blob[k] ^ 0x10]) + blob[k + 1:]}
    if damage != "missing":
        open(path, "wb").write(damaged[damage])
    want = "no checkpoint at" if damage == "missing" else "damaged or not a checkpoint"
    with pytest.raises(ValueError, match=want):
        checkpoint.load_checkpoint(path)


def test_round_trip_plain_torch_and_a_full_disk_keeps_the_previous_one(tmp_path, monkeypatch):
    path = str(tmp_path / "ckpt.pt")
    ckpt = {"model": {"w": torch.arange(6.0)}, "state": {"iter_num": 3}}
    checkpoint.save_checkpoint(path, ckpt)
    back = checkpoint.load_checkpoint(path)
    assert torch.equal(back["model"]["w"], ckpt["model"]["w"]) and back["state"] == {"iter_num": 3}
    # still a plain torch.save file
    assert torch.load(path, weights_only=False)["state"]["iter_num"] == 3
    before = open(path, "rb").read()
    full = OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(full))
    with pytest.raises(ValueError, match=r"could not write checkpoint .*No space left on device"
                                         r".*previous one is intact"):
        checkpoint.save_checkpoint(path, {"state": {"iter_num": 2}})
    # no temporary left behind
    assert open(path, "rb").read() == before and os.listdir(tmp_path) == ["ckpt.pt"]


def test_atomic_write_temporaries_are_unique_and_cleaned(tmp_path):
    """Two writers of one path get different temporary names (a shared name let one trainer delete
    the other's)."""
    seen = []

    def write(f):
        seen.append(os.readlink(f"/proc/self/fd/{f.fileno()}"))  # the temporary file's path
        f.write(b"x")

    files.atomic_write(str(tmp_path / "a"), write)
    files.atomic_write(str(tmp_path / "a"), write)
    assert len(set(seen)) == 2 and all(os.path.dirname(n) == str(tmp_path) for n in seen)
    assert os.listdir(tmp_path) == ["a"] and oct(os.stat(tmp_path / "a").st_mode & 0o777) != "0o600"


def test_one_trainer_per_run_directory_and_no_checkpoint_replaced_unasked(tmp_path):
    cfg = parse_args([f"--out_dir={tmp_path}"])
    with checkpoint.run_dir(cfg):
        with pytest.raises(ValueError, match="another trainer is running"):
            with checkpoint.run_dir(cfg):
                pass
    (tmp_path / "ckpt.pt").write_bytes(b"old")
    with pytest.raises(ValueError, match="continue it with --resume, pick another --out_dir, "
                                         "or replace it with --overwrite"):
        with checkpoint.run_dir(cfg):
            pass
    assert os.listdir(tmp_path) == ["ckpt.pt"]  # the refusal took its lock away
    # and the first trainer's is gone
    for flag in ("--resume", "--overwrite", "--save_checkpoint=false"):
        with checkpoint.run_dir(parse_args([f"--out_dir={tmp_path}", flag])):
            pass


def test_the_run_directory_holds_nothing_of_the_run_but_checkpoints(tmp_path):
    """The lock goes at the end, error or not, and so do the directories the run made if they are
    empty; a directory that was there stays. (Every error after parsing left out_dir/.lock.)"""
    with pytest.raises(ValueError, match="boom"):
        with checkpoint.run_dir(parse_args([f"--out_dir={tmp_path / 'a' / 'b'}"])):
            assert os.listdir(tmp_path / "a" / "b") == [".lock"]
            raise ValueError("boom")
    assert os.listdir(tmp_path) == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"--out_dir=.*file is a file; pick a directory"):
        with checkpoint.run_dir(parse_args([f"--out_dir={tmp_path / 'file'}"])):
            pass


def test_check_resume_names_every_change():
    saved = {"corpus": "abc", "seed": 1, "lr_schedule": [1e-3, 1e-4, 0, 100],
             "ltd": {"s": {"require_steps": 6, "k": 1}}}
    checkpoint.check_resume(saved, dict(saved), "ckpt.pt")
    new = {**saved, "lr_schedule": [1e-3, 1e-4, 0, 200], "ltd": {"s": {"require_steps": 9, "k": 1}}}
    with pytest.raises(ValueError, match=r"lr_schedule .* -> \[0.001, 0.0001, 0, 200\]; "
                                         r"ltd.s.require_steps 6 -> 9; pass"):
        checkpoint.check_resume(saved, new, "ckpt.pt")
    with pytest.raises(ValueError, match=r"another corpus than the one the checkpoint trained on "
                                         r"\(content abc -> xyz\)"):
        checkpoint.check_resume(saved, {**new, "corpus": "xyz"}, "ckpt.pt")
