"""experiments/gpu.py (issue 48's GPU check) at its tiny size on the CPU: every step runs and the
log folder holds the three parts' results."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import data


@pytest.mark.slow
def test_the_tiny_gpu_check_writes_the_three_parts_results(tmp_path):
    """python -m experiments.gpu LOG --size=tiny: pytest's count, bench.py ltd's efficiency at each
    keep, bench.py dense's row, the composition's speedup row, in their logs and in gpu.log's
    answers; a step that fails is named and the exit status is 1."""
    rng = np.random.default_rng(0)
    (tmp_path / "text").mkdir()
    for k in range(6):  # ~150 KB: the tiny size's 61K-token budget in under one pass
        (tmp_path / "text" / f"{k}.txt").write_text("\n".join(
            f"the {rng.choice(['cat', 'owl', 'fox'])} sat on the {rng.choice(['mat', 'log'])}."
            for _ in range(800)))
    data.prepare([str(tmp_path / "text")], str(tmp_path / "data"), verbose=False)
    log = tmp_path / "log"
    cmd = [sys.executable, "-m", "experiments.gpu", str(log), "--size=tiny",
           f"--data_dir={tmp_path / 'data'}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    text = (log / "gpu.log").read_text()
    answers = text[text.index("=== the answers"):]
    assert re.search(r"^\d+ passed", (log / "1_pytest.log").read_text().splitlines()[-1])
    ltd = [line.split() for line in (log / "2_bench_ltd.log").read_text().splitlines()
           if line.split()[:1] == ["eager"]]
    assert [row[1] for row in ltd] == ["1.00", "0.75", "0.50", "0.25"]  # kept r/T
    assert ltd[0][-1] == "-" and len([float(row[-1]) for row in ltd[1:]]) == 3  # efficiencies
    assert all(" ".join(row) in " ".join(answers.split()) for row in ltd)
    assert re.search(r"^ours \(model\.py\) ", answers, re.M)
    speedup = re.search(r"^CL_seqtru_voc \+ random-LTD +2x \(Table 7\) +(\S+)", answers, re.M)
    assert speedup and re.fullmatch(r"(>=)?[\d.]+x|not", speedup[1])
    assert (log / "3_reproduce.log").exists() and answers.rstrip().endswith("every step succeeded")
    assert len(list(log.glob("reproduce/size_tiny/*/summary.json"))) == 6  # 2 arms x 3 budgets
    done = subprocess.run(cmd[:-1] + [f"--data_dir={tmp_path / 'none'}"], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 1 and done.stdout.rstrip().endswith("failed: 3_reproduce")
    assert os.path.exists(log / "3_reproduce.log")
