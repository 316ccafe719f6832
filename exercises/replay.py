"""Every call that training makes to an exercise function, recorded from a run of the reference and
replayed against yours: the tests' replay tier (tests/test_exercises.py) and --compare's checks
of a draw of yours on its own run's calls (exercises/compare.py) stand on it.

A recorded call is its arguments as they were when the call was made and what it returned:

    {"name": "seqlen_truncate", "flags": "curriculum", "args": [batch, 12], "result": rows}

stored in one .npz (tests/fixtures/exercise_calls.npz, written by
tests/fixtures/make_exercise_calls.py): the calls as JSON, each array once under a key.

Replayed, in the recorded order:
- a function without randomness must give the reference's result exactly: the same values, the
  same type and dtype (a float 2304.0 is not the integer 2304, float32 is not float64), and leave
  every input as it was (values and dtype);
- a draw (8 Bag.draw, 9 sample_kept_indices) cannot be asked for the reference's ids (another
  correct draw uses the generator otherwise), so each call is checked for what a draw owes:
  distinct ids of the bag (sorted distinct positions), the bag left with exactly the others, the
  generator passed in honoured (its state gives the same draw, whatever the global RNG does) and
  advanced, and over all the calls: uniform (each slot of the bag, each position, as often as
  chance says, within 5 standard deviations).

But:
- a gather or a scatter is replayed with leaf inputs of the recorded values, and its gradients
  (for one fixed weighting of the output) must equal the reference's, recomputed here;
- GatherRows.backward gets a stand-in ctx holding what forward saved (rows, n_rows).
"""

import functools
import hashlib
import inspect
import json
import math
import types

import numpy as np
import torch

PARAMS = {"unigram_neg_log_p": ["counts"], "vocab_rarity": ["samples", "neg_log_p"],
          "sort_index": ["sample_to_metric"],
          "admitted_prefix": ["difficulty_type", "d", "index_to_sample", "index_to_metric"],
          "seqlen_truncate": ["batch"], "seqlen_reshape": ["batch"], "gather_tokens": ["x", "idx"],
          "scatter_tokens": ["x", "idx", "y"], "GatherRows.backward": ["ctx", "grad"]}
DRAWS = ("Bag.draw", "sample_kept_indices")  # random: checked by properties, not by values
SUMS = ("unigram_neg_log_p", "vocab_rarity")  # float arithmetic: another order moves the last
# digits (compared to 1e-12 relative); every other result is exact (copies, integers)
# the fixture keeps the first 2 calls of each flag set of these (float activations: the same
# branches every step, and a small file)
FIXTURE_KEEP = {"gather_tokens": 2, "scatter_tokens": 2, "GatherRows.backward": 2}


# -----------------------------------------------------------------------------
# values <-> JSON and arrays


def encode(v, arrays):
    """A JSON-able form of v; every array goes into arrays (key -> np.ndarray) once."""
    if isinstance(v, torch.Tensor):
        return {"tensor": put(v.detach().cpu().numpy(), arrays), "grad": v.requires_grad,
                "device": v.device.type}
    if isinstance(v, np.ndarray):
        return {"array": put(v, arrays)}
    if isinstance(v, torch.Generator):
        return {"torch_generator": put(v.get_state().numpy(), arrays)}
    if isinstance(v, np.random.Generator):
        return {"rng": v.bit_generator.state}
    if isinstance(v, torch.device):
        return {"device": str(v)}
    if isinstance(v, (tuple, list)):
        return {"tuple" if isinstance(v, tuple) else "list": [encode(x, arrays) for x in v]}
    if isinstance(v, np.generic):
        return {"scalar": v.item(), "dtype": v.dtype.str}
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    raise TypeError(f"cannot record a {type(v).__name__}")


def put(a, arrays):
    """The key of array a in arrays (the same bytes: the same key)."""
    key = hashlib.sha1(a.dtype.str.encode() + str(a.shape).encode() + a.tobytes()).hexdigest()[:16]
    arrays.setdefault(key, a.copy())
    return key


def decode(v, arrays):
    """A fresh copy of what encode gave: arrays and tensors new, so a call may change them."""
    if not isinstance(v, dict):
        return v
    if "tensor" in v:
        t = torch.from_numpy(arrays[v["tensor"]].copy())
        return t.requires_grad_(True) if v["grad"] else t
    if "array" in v:
        return arrays[v["array"]].copy()
    if "torch_generator" in v:
        g = torch.Generator()
        g.set_state(torch.from_numpy(arrays[v["torch_generator"]].copy()))
        return g
    if "rng" in v:
        rng = np.random.default_rng()
        rng.bit_generator.state = v["rng"]
        return rng
    if "device" in v:
        return torch.device(v["device"])
    if "tuple" in v or "list" in v:
        items = [decode(x, arrays) for x in v.get("tuple", v.get("list"))]
        return tuple(items) if "tuple" in v else items
    if "scalar" in v:
        return np.dtype(v["dtype"]).type(v["scalar"])
    return {k: decode(x, arrays) for k, x in v.items()}  # a bag, a ctx


def save(path, calls, arrays):
    """calls (JSON-able) and arrays in one compressed .npz."""
    blob = np.frombuffer(json.dumps(calls).encode(), dtype=np.uint8)
    keys = np.frombuffer(json.dumps(list(arrays)).encode(), dtype=np.uint8)
    named = {f"a{i}": a for i, a in enumerate(arrays.values())}
    np.savez_compressed(path, calls_json=blob, keys_json=keys, **named)


def load(path):
    """-> (calls, arrays) as save wrote them."""
    with np.load(path) as f:
        keys = json.loads(f["keys_json"].tobytes())
        arrays = {k: f[f"a{i}"] for i, k in enumerate(keys)}
        return json.loads(f["calls_json"].tobytes()), arrays


# -----------------------------------------------------------------------------
# recording: the concept functions wrapped, each call kept as it was made


class Tape:
    """Records the calls of the wrapped functions: calls[i] = {"name", "flags", "args", "result"}.
    keep: {name: k}, only the first k calls of `name` under each flags label."""

    def __init__(self, keep=None):
        self.calls, self.arrays, self.flags = [], {}, ""
        self.keep, self.counts = keep or {}, {}

    def wrap(self, name, fn):
        """fn, recording each call; a staticmethod stays one."""
        if isinstance(fn, staticmethod):
            return staticmethod(self.wrap(name, fn.__func__))
        sig = inspect.signature(fn)

        @functools.wraps(fn)  # subtle: and the index cache still hashes fn's own source
        def call(*args, **kwargs):
            args = list(sig.bind(*args, **kwargs).arguments.values())  # without unpassed defaults
            seen = self.counts.get((name, self.flags), 0)
            if seen >= self.keep.get(name, seen + 1):
                return fn(*args)
            self.counts[(name, self.flags)] = seen + 1
            before = [self.state(a) for a in args]  # as they were: a draw changes its bag
            out = fn(*args)
            self.calls.append({"name": name, "flags": self.flags, "args": before,
                               "result": encode(out, self.arrays)})
            return out
        return call

    def swaps(self):
        """[(n, name, the reference's, recorded)] for all 13, for exercises.swaps.install."""
        from exercises import EXERCISES
        from exercises.swaps import reference

        out = []
        for n, concept, name in EXERCISES:
            ref = reference(concept, name)
            out.append((n, name, ref, self.wrap(name, ref)))
        return out

    def state(self, a):
        """An argument as it is now: a bag's slots, a ctx's saved rows, or the value itself."""
        if hasattr(a, "ids") and hasattr(a, "members"):  # a sampler.Bag: the ids still in it
            return {"ids": encode(a.ids[: a.n], self.arrays), "n": a.n, "slots": len(a.ids),
                    "members": encode(a.members, self.arrays)}
        if hasattr(a, "saved_tensors"):  # GatherRows' ctx
            return {"rows": encode(a.saved_tensors[0], self.arrays), "n_rows": a.n_rows}
        return encode(a, self.arrays)


# -----------------------------------------------------------------------------
# replay: yours on each recorded call


class Wrong(Exception):
    """A replayed call where yours is not the reference's: what, the call, yours, expected."""

    def __init__(self, what, call, yours=None, expected=None, cause=None):
        super().__init__(what)
        self.what, self.call, self.yours, self.expected = what, call, yours, expected
        self.cause = cause  # the error yours raised, if it raised


def kind(v):
    """What a value is, to the dtype: 'int', 'float64', 'ndarray int64', 'tensor float32 cpu'."""
    if isinstance(v, torch.Tensor):
        return f"tensor {str(v.dtype).replace('torch.', '')} on {v.device.type}"
    if isinstance(v, np.ndarray):
        return f"ndarray {v.dtype}"
    if isinstance(v, (bool, np.bool_)):
        return "bool"
    if isinstance(v, (int, np.integer)):
        return "int"  # subtle: a numpy int slices and counts as a Python int does
    if isinstance(v, (float, np.floating)):
        return np.dtype(type(v)).name if isinstance(v, np.floating) else "float64"
    if isinstance(v, (tuple, list)):
        return f"{type(v).__name__} of {len(v)}"
    return type(v).__name__


def as_array(v):
    return v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else np.asarray(v)


def equal(a, b, rtol=0.0):
    """Same kind, shape and values (NaN equals NaN; floats within rtol); tuples item by item."""
    if kind(a) != kind(b):
        return False
    if isinstance(a, (tuple, list)):
        return all(equal(x, y, rtol) for x, y in zip(a, b))
    if a is None or isinstance(a, str):
        return a == b
    x, y = as_array(a), as_array(b)
    if x.shape != y.shape:
        return False
    if rtol and x.dtype.kind == "f":
        return bool(np.allclose(x, y, rtol=rtol, atol=0, equal_nan=True))
    return np.array_equal(x, y, equal_nan=x.dtype.kind in "fc")


def describe(call, args=None):
    """The call in one line: name(args), arrays by shape and dtype, small ones in full."""
    def one(v):
        if isinstance(v, dict) and "ids" in v:
            return f"a bag holding {v['n']} ids"
        if isinstance(v, dict) and "rows" in v:
            return f"ctx(rows {tuple(v['rows'].shape)}, n_rows={v['n_rows']})"
        if isinstance(v, dict):  # still encoded: a generator, a device
            said = {"rng": "rng", "torch_generator": "a torch.Generator", "device": None}
            key = next(iter(v))
            return said.get(key) or (f"torch.device({v['device']!r})" if key == "device" else key)
        if isinstance(v, types.SimpleNamespace):
            return f"ctx(rows {tuple(v.saved_tensors[0].shape)}, n_rows={v.n_rows})"
        if isinstance(v, (torch.Tensor, np.ndarray)):
            a = as_array(v)
            if a.size <= 8:
                return repr(a.tolist())
            return f"{kind(v).split()[0]} {a.dtype} {tuple(a.shape)}"
        if isinstance(v, torch.Generator):
            return "a torch.Generator"
        if isinstance(v, np.random.Generator):
            return "rng"
        return repr(v)
    shown = ", ".join(one(a) for a in (args if args is not None else call["args"]))
    return (f"{call['name']}({shown}) (call {call['index']} of training with the {call['flags']} "
            "flags)")


def replay(name, fn, calls, arrays):
    """Yours (fn; for a method the class that holds it) on every recorded call of `name`, in order;
    raises Wrong at the first that is not as the reference's (an error yours raises, too)."""
    check = {"Bag.draw": check_draw, "sample_kept_indices": check_kept}.get(name, check_call)
    stats = {}  # what the draws' uniformity is judged on, over all the calls
    mine = [dict(c, index=i) for i, c in enumerate(calls) if c["name"] == name]
    global_rngs = torch.get_rng_state(), np.random.get_state()  # the draws' checks reseed them
    try:
        for call in mine:
            try:
                check(name, fn, call, arrays, stats)
            except (Wrong, NotImplementedError):
                raise
            except Exception as e:  # noqa: BLE001  (whatever yours raises)
                args = [decode_arg(a, arrays) for a in call["args"]]
                raise Wrong(f"raised {type(e).__name__}: {e}", describe(call, args),
                            cause=e) from None
    finally:
        torch.set_rng_state(global_rngs[0])
        np.random.set_state(global_rngs[1])
    if name == "Bag.draw":
        uniform_slots(stats, mine)
    if name == "sample_kept_indices":
        uniform_positions(stats, mine)
    return len(mine)


def check_call(name, fn, call, arrays, stats):
    """A function without randomness: the reference's result and kind, its inputs untouched."""
    args = [decode_arg(a, arrays) for a in call["args"]]
    before = [decode_arg(a, arrays) for a in call["args"]]
    expected = decode(call["result"], arrays)
    got = run_one(name, fn, args)
    if not equal(got, expected, 1e-12 if name in SUMS else 0.0):
        what, k = "not the reference's result", ""
        if isinstance(expected, tuple) and kind(got) == kind(expected):  # the part that differs
            i = next(i for i, (a, b) in enumerate(zip(got, expected)) if not equal(a, b))
            got, expected, k = got[i], expected[i], f" (item {i + 1} of {len(expected)})"
        if kind(got) != kind(expected):
            what = f"returned {kind(got)}, the reference {kind(expected)}"
        raise Wrong(what + k, describe(call, before), got, expected)
    for i, (a, b) in enumerate(zip(args, before)):
        if isinstance(b, (np.ndarray, torch.Tensor)) and not equal(a, b):
            said = PARAMS.get(name, [])[i : i + 1] or [f"argument {i + 1}"]
            raise Wrong(f"changed its input {said[0]} in place (work on a copy)",
                        describe(call, before), a, b)
    if name in ("gather_tokens", "scatter_tokens"):
        check_gradients(name, call, arrays, got, args)


def decode_arg(a, arrays):
    v = decode(a, arrays)
    if isinstance(a, dict) and "rows" in a:  # a ctx stand-in
        return types.SimpleNamespace(saved_tensors=(v["rows"],), n_rows=v["n_rows"])
    return v


def run_one(name, fn, args):
    """fn(*args); a GatherRows class's backward is called as autograd calls it."""
    if name == "GatherRows.backward":
        fn = vars(fn)["backward"]
        fn = fn.__func__ if isinstance(fn, staticmethod) else fn
    return fn(*args)


def check_gradients(name, call, arrays, got, args):
    """The gradients of sum(out * w) reach every input that requires one as the reference's do."""
    import random_ltd  # the reference (a test or a compare never patches it when this runs)

    ref_args = [decode(a, arrays) for a in call["args"]]
    expected = getattr(random_ltd, name)(*ref_args)
    w = torch.randn(expected.shape, generator=torch.Generator().manual_seed(46),
                    dtype=expected.dtype)
    if not got.requires_grad:
        raise Wrong("your output does not require grad: no gradient reaches the model",
                    describe(call, ref_args))
    (got * w).sum().backward()
    (expected * w).sum().backward()
    for i, (a, b) in enumerate(zip(args, ref_args)):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            ga = a.grad if a.grad is not None else torch.zeros_like(b)
            if not equal(ga, b.grad):
                raise Wrong(f"wrong gradient of {PARAMS[name][i]} (loss = sum(out * w), w fixed)",
                            describe(call, ref_args), ga, b.grad)


# -----------------------------------------------------------------------------
# the draws: what each owes, on every recorded call, and uniform over all of them


def check_draw(name, Bag, call, arrays, stats):
    """Yours (the Bag class) on one recorded Bag.draw: n distinct ids of the bag, the bag left with
    the others, rng honoured (its state decides the draw) and advanced."""
    state, rng_state, n = call["args"][0], call["args"][1], call["args"][2]
    m = state["n"]
    inside = decode(state, arrays)["ids"][:m]
    out, bag, rng_after = draw_once(Bag, state, rng_state, n, arrays, global_seed=1)
    expected = decode(call["result"], arrays)
    if kind(out) != kind(expected):
        raise Wrong(f"returned {kind(out)}, the reference {kind(expected)}", describe(call))
    slot = {int(v): i for i, v in enumerate(inside)}
    got = np.asarray(out).tolist()
    if len(got) != n or len(set(got)) != n or not set(got) <= set(slot):
        raise Wrong(f"expected {n} distinct ids of the {m} in the bag", describe(call), out,
                    f"{n} of {sorted(slot)[:12]}{' ...' if m > 12 else ''}")
    left = sorted(set(slot) - set(got))
    if bag.n != m - n or sorted(bag.ids[: bag.n].tolist()) != left:
        raise Wrong("the bag after the draw must hold exactly the ids not drawn", describe(call),
                    sorted(bag.ids[: bag.n].tolist()), left)
    if rng_after == rng_state["rng"]:
        raise Wrong("the generator rng passed in was not advanced: this draw does not use it "
                    "(every draw must, or ids come out in the bag's order)", describe(call))
    again = np.asarray(draw_once(Bag, state, rng_state, n, arrays, global_seed=2)[0]).tolist()
    if again != got:
        raise Wrong("the same rng state gave another draw (use rng, not the global RNG)",
                    describe(call), again, got)
    others = [sorted(np.asarray(draw_once(Bag, state, {"rng": seeded(k)}, n, arrays, 1)[0])
                     .tolist()) for k in (1, 2, 3)]
    if math.comb(m, n) >= 1000 and all(o == sorted(got) for o in others):
        raise Wrong("three other rng states gave the same ids: is rng used?", describe(call))
    pos = np.array([slot[v] for v in got])  # where the drawn ids sat in the bag
    stats["sum"] = stats.get("sum", 0.0) + float(np.sum(pos - (m - 1) / 2))
    stats["var"] = stats.get("var", 0.0) + n * (m * m - 1) / 12  # subtle: without the draws'
    # negative covariance: a looser bound


def uniform_slots(stats, calls):
    """Over all the calls, the drawn ids sat anywhere in the bag as often as chance says."""
    z = stats["sum"] / math.sqrt(stats["var"]) if stats.get("var") else 0.0
    if abs(z) > 5:
        raise Wrong(f"not uniform over the bag: the ids drawn sat {'late' if z > 0 else 'early'} "
                    f"in it, {z:+.1f} standard deviations over the {len(calls)} calls (every id "
                    "still in the bag must be as likely, whenever it joined)", describe(calls[0]))


def seeded(seed):
    return np.random.default_rng(seed).bit_generator.state


def draw_once(Bag, state, rng_state, n, arrays, global_seed):
    """Bag(members) holding the recorded slots, drawn from with the recorded generator state."""
    s = decode(state, arrays)
    bag = Bag(s["members"])
    bag.ids = np.zeros(s["slots"], dtype=s["ids"].dtype)  # the slots past n held drawn ids
    bag.ids[: s["n"]], bag.n = s["ids"], s["n"]
    rng = decode(rng_state, arrays)
    np.random.seed(global_seed)  # a draw on the global RNG gives another draw on the second
    out = bag.draw(rng, n)
    return out, bag, rng.bit_generator.state


def check_kept(name, fn, call, arrays, stats):
    """Yours on one recorded sample_kept_indices: (B, r) int64 on the device given, ascending
    distinct positions in range(T), the generator honoured and advanced."""
    B, T, r = call["args"][:3]
    given = call["args"][3:]
    device = decode(given[1], arrays) if len(given) > 1 else None
    idx = kept_once(fn, call, arrays, 1)
    want = f"tensor int64 on {device.type if device is not None else 'cpu'}"
    if kind(idx) != want or tuple(idx.shape) != (B, r):
        shape = tuple(idx.shape) if hasattr(idx, "shape") else ""
        raise Wrong(f"returned {kind(idx)} {shape}, expected {want} ({B}, {r})", describe(call))
    bad = (idx[:, 1:] <= idx[:, :-1]).any(1) | (idx < 0).any(1) | (idx >= T).any(1)
    if bad.any():
        b = int(bad.nonzero()[0])
        raise Wrong(f"row {b} is not ascending distinct positions in 0..{T - 1}", describe(call),
                    idx[b])
    if given and isinstance(given[0], dict):  # a generator was passed
        g = decode(given[0], arrays)
        state = g.get_state()
        fn(B, T, r, g, device)
        if torch.equal(g.get_state(), state):
            raise Wrong("the generator passed in was not advanced: the positions do not come from "
                        "it (a resume could not replay them)", describe(call))
        again = kept_once(fn, call, arrays, 2)
        if not torch.equal(again, idx):
            raise Wrong("the same generator state gave other positions: the generator passed in "
                        "must decide them (model.py passes it with a device)", describe(call),
                        again, idx)
    kept = np.bincount(idx.flatten().numpy(), minlength=T)  # (T,) how often each position
    stats.setdefault("rows", []).append((B, r, kept))


def uniform_positions(stats, calls):
    """Over all the calls, each position kept as often as r / T says (5 standard deviations)."""
    T = max(len(kept) for _, _, kept in stats["rows"])
    counts, expect, var = np.zeros(T), np.zeros(T), np.zeros(T)
    for B, r, kept in stats["rows"]:
        t = len(kept)  # each row keeps each of its t positions with probability r / t
        counts[:t] += kept
        expect[:t] += B * r / t
        var[:t] += B * (r / t) * (1 - r / t)
    sd = np.sqrt(var)
    bad = np.flatnonzero(np.abs(counts - expect) > 5 * sd + 1)
    if len(bad):
        p = int(bad[0])
        raise Wrong(f"not uniform: position {p} kept {counts[p]:.0f} times over the {len(calls)} "
                    f"calls, expected {expect[p]:.0f} +- {5 * sd[p]:.0f}", describe(calls[0]))


def kept_once(fn, call, arrays, global_seed):
    args = [decode(a, arrays) for a in call["args"]]
    torch.manual_seed(global_seed)  # positions on the global RNG differ between two calls
    return fn(*args)
