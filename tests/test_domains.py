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
    # equal remainders: lower ids first
    assert domain_counts([1 / 3, 1 / 3, 1 / 3], 8).tolist() == [3, 3, 2]
    # 1.75, 0, 5.25 -> the 1 left goes to domain 0
    assert domain_counts([0.25, 0.0, 0.75], 7).tolist() == [2, 0, 5]
    # --domain_weights=a=0.1,b=0.7: 12.5 and 87.5 (to rounding) still tie
    assert domain_counts([0.1, 0.7], 100).tolist() == [13, 87]


def test_every_global_batch_has_exact_domain_counts_and_the_same_on_every_rank():
    w = [0.5, 0.3, 0.2]
    s, ranks = weighted(w), [weighted(w, rank=r, world=2) for r in range(2)]
    for t in range(20):
        g = s.global_ids(t)
        assert np.bincount(DOMAINS[g], minlength=3).tolist() == [8, 5, 3]  # 8, 4.8, 3.2
        # a window's first token (of T = 32) identifies it
        assert np.array_equal(np.concatenate([r.next_batch(t)[:, 0] // 32 for r in ranks]), g)
        # domains mixed over the batch, not one rank per domain
        assert len(set(DOMAINS[g[:8]].tolist())) > 1


def test_newly_admitted_ids_join_their_domains_current_pass():
    """The pool doubles after 3 steps: no domain repeats an id before its pass over all its n_k ids
    ends. Admission first (the easiest half, then all), then exact counts per domain from the
    admitted ids."""
    metrics = {"a": custom("percentile", lambda u: 50 if u <= 3 else 100)}
    # 4 per domain
    s = weighted([1 / 3] * 3, G=12, seed=0, metrics=metrics, index={"a": metric_index(5)[1]})
    batches = [s.global_ids(t) for t in range(20)]
    for t, b in enumerate(batches):
        assert np.isin(b, s.pool(t)).all()
        assert np.bincount(DOMAINS[b], minlength=3).tolist() == [4, 4, 4]
    for k in range(3):
        n_k = int((DOMAINS == k).sum())
        # the batches inside the pass, and up to the one where it ends
        within = np.concatenate([b[DOMAINS[b] == k] for b in batches[: n_k // 4]])
        upto = np.concatenate([b[DOMAINS[b] == k] for b in batches[: -(-n_k // 4)]])
        assert len(set(within.tolist())) == len(within)
        assert set(upto.tolist()) == set(np.flatnonzero(DOMAINS == k).tolist())
    assert s.mask.all()  # all admitted


def test_domain_weights_deterministic_resumable_and_seeded():
    """A run resumed at step 7 draws the uninterrupted run's batches (so two runs with one seed are
    equal); another seed draws others."""
    straight = run_steps(weighted([0.2, 0.3, 0.5]), 0, 25)
    assert straight != run_steps(weighted([0.2, 0.3, 0.5], seed=2), 0, 25)
    first = weighted([0.2, 0.3, 0.5])
    head = run_steps(first, 0, 7)
    second = weighted([0.2, 0.3, 0.5])
    second.load_state_dict(first.state_dict())
    assert head + run_steps(second, 7, 25) == straight


def test_a_weighted_domain_without_admitted_samples_is_one_line():
    m, index = metric_index(0)
    only_0_and_1 = np.where(m <= 10, DOMAINS % 2, DOMAINS)  # no domain-2 sample has metric <= 10
    s = weighted([0.5, 0.25, 0.25], G=8, seed=0, domains=only_0_and_1,
                 metrics={"a": custom("value", lambda u: 10 if u <= 2 else 49)}, index={"a": index})
    with pytest.raises(ValueError, match=r"domain 2 has weight 0.25 but no admitted samples at "
                                         r"step 0 \({'a': 10}\)"):
        s.global_ids(0)


def test_domain_weights_by_name():
    assert domain_weights("b=1,a=3", ["a", "b"]) == [0.75, 0.25]
    assert domain_weights("a=1,b=1,c=2", ["a", "b", "c"]) == [0.25, 0.25, 0.5]
    # a domain missing, a negative weight, not a number, unnamed
    for text in ("a=1", "a=-1,b=2", "a=x,b=1", "1,3"):
        with pytest.raises(ValueError, match=f"--domain_weights={text} needs a weight >= 0 for "
                                             r"each domain of the corpus \(a, b\), e.g. a=1,b=1"):
            domain_weights(text, ["a", "b"])
    with pytest.raises(ValueError, match="it has none: prepare it with data.py --domain"):
        domain_weights("a=1", [])


def test_window_domains_worked_example(tmp_path):
    """domain_offsets [0, 40, 100], T = 16 -> middles 8, 24, 40, 56, 72, 88
    -> domains [0, 0, 1, 1, 1, 1]."""
    np.zeros(100, dtype=np.uint16).tofile(tmp_path / "train.bin")
    windows = data.SampleWindows(str(tmp_path / "train.bin"), 16)
    (tmp_path / "meta.json").write_text(json.dumps({"domain_offsets": {"train": [0, 40, 100]}}))
    d = window_domains(windows)
    assert d.dtype == np.uint8 and d.tolist() == [0, 0, 1, 1, 1, 1]
    # an empty middle domain: offsets [0, 30, 30, 100] -> windows in domain 0 or 2, never 1
    (tmp_path / "meta.json").write_text(json.dumps({"domain_offsets": {"train": [0, 30, 30, 100]}}))
    assert window_domains(windows).tolist() == [0, 0, 2, 2, 2, 2]
