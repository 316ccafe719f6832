"""autoscale/domains.py: exact per-domain counts in every batch, a pass per domain, the weights by
name, and each window's domain."""

import json

import numpy as np
import pytest

import data
from autoscale.domains import DomainSampler, domain_counts, domain_weights, window_domains
from test_sampler import N, Windows, custom, metric_index, run_steps

DOMAINS = np.random.default_rng(4).integers(0, 3, N)  # 3 domains of about 67 samples


def weighted(w, G=16, seed=1, rank=0, world=1, domains=DOMAINS, metrics=None, index=None):
    return DomainSampler(Windows(N, 32), G, domains, w, metrics, index, seed, rank, world)


def test_domain_counts_largest_remainder():
    assert domain_counts([0.5, 0.3, 0.2], 8).tolist() == [4, 2, 2]  # remainders 0, .4, .6
    assert domain_counts([1 / 3, 1 / 3, 1 / 3], 8).tolist() == [3, 3, 2]  # equal remainders: lower ids first
    assert domain_counts([0.25, 0.0, 0.75], 7).tolist() == [2, 0, 5]  # 1.75, 0, 5.25 -> the 1 left goes to domain 0
    assert domain_counts([0.1] * 10, 512).sum() == 512


def test_every_global_batch_has_exact_domain_counts_and_the_same_on_every_rank():
    w = [0.5, 0.3, 0.2]
    s, ranks = weighted(w), [weighted(w, rank=r, world=2) for r in range(2)]
    for t in range(20):
        g = s.global_ids(t)
        assert np.bincount(DOMAINS[g], minlength=3).tolist() == [8, 5, 3]  # 8, 4.8, 3.2
        # a window's first token (of T = 32) identifies it
        assert np.array_equal(np.concatenate([r.next_batch(t)[:, 0] // 32 for r in ranks]), g)
        assert len(set(DOMAINS[g[:8]].tolist())) > 1  # domains mixed over the batch, not one rank per domain


def test_newly_admitted_ids_join_their_domains_current_pass():
    """The pool doubles after 3 steps: no domain repeats an id before its pass over all its n_k ids ends. Admission
    first (the easiest half, then all), then exact counts per domain from the admitted ids."""
    _, index = metric_index(5)
    s = weighted([1 / 3] * 3, G=12, seed=0, metrics={"a": custom("percentile", lambda u: 50 if u <= 3 else 100)},
                 index={"a": index})  # 4 per domain
    batches = [s.global_ids(t) for t in range(20)]
    for t, b in enumerate(batches):
        assert np.isin(b, s.pool(t)).all() and np.bincount(DOMAINS[b], minlength=3).tolist() == [4, 4, 4]
    for k in range(3):
        n_k = int((DOMAINS == k).sum())
        within = np.concatenate([b[DOMAINS[b] == k] for b in batches[: n_k // 4]])  # batches inside the pass
        upto = np.concatenate([b[DOMAINS[b] == k] for b in batches[: -(-n_k // 4)]])  # and the one where it ends
        assert len(set(within.tolist())) == len(within)
        assert set(upto.tolist()) == set(np.flatnonzero(DOMAINS == k).tolist())
    assert np.bincount(DOMAINS[s.mask], minlength=3).tolist() == np.bincount(DOMAINS).tolist()  # all in


def test_domain_weights_deterministic_resumable_and_seeded():
    def make_(seed=3):
        return weighted([0.2, 0.3, 0.5], G=12, seed=seed)

    straight = run_steps(make_(), 0, 25)
    assert straight == run_steps(make_(), 0, 25) and straight != run_steps(make_(4), 0, 25)
    first = make_()
    head = run_steps(first, 0, 7)
    second = make_()
    second.load_state_dict(first.state_dict())
    assert head + run_steps(second, 7, 25) == straight


def test_a_weighted_domain_without_admitted_samples_is_one_line():
    m, index = metric_index(0)
    only_0_and_1 = np.where(m <= 10, DOMAINS % 2, DOMAINS)  # no domain-2 sample has metric <= 10
    s = weighted([0.5, 0.25, 0.25], G=8, seed=0, domains=only_0_and_1,
                 metrics={"a": custom("value", lambda u: 10 if u <= 2 else 49)}, index={"a": index})
    with pytest.raises(ValueError, match=r"domain 2 has weight 0.25 but no admitted samples at step 0 \({'a': 10}\)"):
        s.global_ids(0)


def test_domain_weights_by_name():
    assert domain_weights("b=1,a=3", ["a", "b"]) == [0.75, 0.25]
    assert domain_weights("a=1,b=1,c=2", ["a", "b", "c"]) == [0.25, 0.25, 0.5]
    for text in ("a=1", "a=-1,b=2", "a=x,b=1", "1,3"):  # a domain missing, a negative weight, not a number, unnamed
        with pytest.raises(ValueError, match=f"--domain_weights={text} needs a weight >= 0 for each domain of the "
                                             r"corpus \(a, b\), e.g. a=1,b=1"):
            domain_weights(text, ["a", "b"])
    with pytest.raises(ValueError, match="it has none: prepare it with data.py --domain"):
        domain_weights("a=1", [])


def test_window_domains_worked_example(tmp_path):
    """domain_offsets [0, 40, 100], T = 16 -> middles 8, 24, 40, 56, 72, 88 -> domains [0, 0, 1, 1, 1, 1]."""
    np.zeros(100, dtype=np.uint16).tofile(tmp_path / "train.bin")
    (tmp_path / "meta.json").write_text(json.dumps({"domains": ["a", "b"], "domain_offsets": {"train": [0, 40, 100]}}))
    d = window_domains(data.SampleWindows(str(tmp_path / "train.bin"), 16))
    assert d.dtype == np.uint8 and d.tolist() == [0, 0, 1, 1, 1, 1]
    # an empty middle domain: offsets [0, 30, 30, 100] -> windows in domain 0 or 2, never 1
    (tmp_path / "meta.json").write_text(json.dumps({"domain_offsets": {"train": [0, 30, 30, 100]}}))
    assert window_domains(data.SampleWindows(str(tmp_path / "train.bin"), 16)).tolist() == [0, 0, 2, 2, 2, 2]
