"""A loop's trips in the jitted replay (``ptojax.ascend.replay_loops``): the runtime writes a
kernel's loops out trip by trip; the replay rolls the repetitions back into one ``lax.fori_loop``
where every GM buffer plays the same part in every trip (shared, fresh per trip, carried from the
previous trip), and leaves them unrolled where one does not. Rolled or not, the replay computes the
same bits, and what the eager engine computes (within the replay's one-ulp contract)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import ptojax as pj
from helpers import assert_replay_matches
from ptojax.ascend import replay_graph, replay_loops
from ptojax.ascend.replay_loops import Loop, Step, roll


# ------------------------------------------------------------------------------ roll on step lists
def _initial(k):
    return None if k < 10 else np.zeros(4, np.float32)


def _layout(k):
    return 4, np.dtype(np.float32)


def _scan(trips: int, extra=()):
    """A ``scan``'s steps: buffer 1 the first carry, 2 the stacked output; per trip a fresh row
    (10 + 3t), carry (11 + 3t) and output row (12 + 3t)."""
    steps = [Step("init", (0, 1))]
    carry = 1
    for t in range(trips):
        row, new, out = 10 + 3 * t, 11 + 3 * t, 12 + 3 * t
        steps += [Step("slice", (0, row)), Step("body", (carry, row, new, out)), Step("stack", (2, out, 2))]
        carry = new
    return steps + [Step("after", (carry, *extra))]


def test_a_scan_rolls_into_one_loop_with_its_carry():
    items = roll(_scan(6), _initial, _layout, set())
    assert [type(i) for i in items] == [Step, Loop, Step]
    loop = items[1]
    assert loop.trips == 6 and loop.body == tuple(_scan(1)[1:4])
    assert loop.moves == ((1, 11),)                    # the carry takes the previous trip's new value
    assert loop.outer == (0, 2) and loop.last == {11: 26}   # the last trip's carry is read after the loop


def test_a_buffer_read_two_trips_later_stays_unrolled():
    steps = [Step("init", (0, 1))]
    for t in range(6):
        steps.append(Step("body", (0, 10 + t, 10 + t - 2 if t >= 2 else 1)))
    assert not any(isinstance(i, Loop) for i in roll(steps, _initial, _layout, set()))


def test_an_earlier_trips_buffer_read_after_the_loop_stays_unrolled():
    steps = _scan(6, extra=(14,))                      # trip 1's output row
    assert not any(isinstance(i, Loop) for i in roll(steps, _initial, _layout, set()))
    assert any(isinstance(i, Loop) for i in roll(_scan(6, extra=(27,)), _initial, _layout, set()))


def test_trips_that_start_a_buffer_differently_carry_a_table():
    steps = [Step("body", (0, 10 + t)) for t in range(5)]
    values = {10 + t: np.full(4, t, np.float32) for t in range(5)}
    (loop,) = roll(steps, values.get, _layout, set())
    np.testing.assert_array_equal(loop.inits[10], np.stack([values[10 + t] for t in range(5)]))
    (loop,) = roll(steps, lambda k: np.ones(4, np.float32), _layout, set())
    assert loop.inits[10].shape == (4,)                # alike in every trip: one value


# ------------------------------------------------------------------------------ kernels under jax.jit
def _fib(x):
    def body(c, row):
        a, b = c
        return (b, a * 0.5 + b * 0.25 + row), a            # a carry passed on: read two trips after it is made
    return lax.scan(body, (x[0], x[1]), x)


def _in_place(x):
    return lax.fori_loop(1, x.shape[0], lambda i, c: c.at[i].set(jnp.sin(c[i - 1]) + 1.0), x)


def _nested(x):
    def outer(i, acc):
        c, ys = lax.scan(lambda c, row: (c * 0.5 + row, c), acc, x)
        return c + ys[0]
    return lax.fori_loop(0, 5, outer, x[0])


def _stacked(x):
    c, ys = lax.scan(lambda c, row: (c + row, c * 2.0), x[0] * 0.0, x)
    return c, ys, ys.sum(0)


def _while(x):
    return lax.while_loop(lambda s: s[0] < 8, lambda s: (s[0] + 1, jnp.tanh(s[1] + x[0])), (0, x[1]))[1]


def _int_counter(x):
    def body(c, row):
        return c + row * 3 - (c > 5), c
    return lax.scan(body, jnp.zeros(x.shape[1], x.dtype), x)


CASES = {"carry-passed-on": (_fib, (12, 64), np.float32), "in-place": (_in_place, (10, 64), np.float32),
         "nested": (_nested, (6, 64), np.float32), "stacked": (_stacked, (12, 64), np.float32),
         "while": (_while, (4, 64), np.float32), "int32": (_int_counter, (12, 40), np.int32)}


def _loops(hlo: str) -> int:
    return hlo.count("stablehlo.while")


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_loop_kernel_rolls_and_computes_what_it_unrolled_does(case, monkeypatch):
    fn, shape, dtype = CASES[case]
    rng = np.random.default_rng(len(case))
    x = (rng.standard_normal(shape) if dtype == np.float32 else rng.integers(-9, 9, shape)).astype(dtype)
    rolled = pj.kernel(fn)
    hlo = jax.jit(rolled).lower(x).as_text()
    assert "callback" not in hlo and _loops(hlo) >= 1
    got = jax.jit(rolled)(x)
    assert_replay_matches(got, rolled(x), case)
    monkeypatch.setattr(replay_loops, "MIN_TRIPS", 10 ** 6)
    unrolled = pj.kernel(fn)
    assert _loops(jax.jit(unrolled).lower(x).as_text()) < _loops(hlo)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(jax.jit(unrolled)(x)), strict=True):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w), err_msg=case)


def test_a_scan_over_many_rows_is_one_loop_under_jit():
    """A ``lax.scan`` over 300 rows is about 900 block calls: written out trip by trip the replay took
    minutes of XLA compile (past ``MAX_STEPS`` it took the host runtime); rolled it is one loop."""
    def rnn(x):
        return lax.scan(lambda c, r: (c * 0.9 + r, c), jnp.zeros(32, jnp.float32), x)

    x = np.random.default_rng(300).standard_normal((300, 32)).astype(np.float32)
    kernel = pj.kernel(rnn)
    hlo = jax.jit(kernel).lower(x).as_text()
    assert "callback" not in hlo and _loops(hlo) == 1
    for got, want in zip(jax.tree.leaves(jax.jit(kernel)(x)), jax.tree.leaves(kernel(x)), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def _matmul_chain(x, w):
    c = x[0]
    for i in range(1, x.shape[0]):
        c = jnp.tanh(jnp.dot(c, w) + x[i])
    return c


def _tanh_chain(x, w):
    c = x[0, 0]
    for i in range(1, x.shape[0]):
        c = jnp.tanh(c * 0.9 + x[i, 0])
    return c


@pytest.mark.parametrize("fn", [_matmul_chain, _tanh_chain])
def test_a_long_graph_that_does_not_roll_runs_on_the_host_under_jit(fn):
    """Every row ``x[i]`` is its own window, so no two trips are alike: with a matmul per row 40 block
    calls in a chain, without one program of 20 ``tanh`` steps (520 instructions). XLA compiles
    either in time that grows faster than the chain (60 calls: 13-24 s; the program: 6-11 s)."""
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((21, 8, 32)).astype(np.float32), rng.standard_normal((32, 32)).astype(np.float32)
    kernel = pj.kernel(fn)
    assert "callback" in jax.jit(kernel).lower(x, w).as_text()
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(x, w)), np.asarray(kernel(x, w)))
    assert replay_graph.MAX_STEPS < 40 and replay_graph.MAX_INSTRUCTIONS < 520


def test_a_rolled_loop_composes_with_vmap():
    fn = pj.kernel(CASES["carry-passed-on"][0])
    xs = np.random.default_rng(5).standard_normal((3, 12, 64)).astype(np.float32)
    got = jax.jit(jax.vmap(fn))(xs)
    for b in range(3):
        assert_replay_matches(jax.tree.map(lambda y: y[b], got), fn(xs[b]), f"batch {b}")


def test_trips_whose_constants_differ_only_in_the_sign_of_zero_keep_their_own():
    def fn(x):
        def body(i, acc):
            z = (i.astype(jnp.float32) - 2.5) * 0.0            # -0.0 in trips 0-2, +0.0 in trips 3-5
            return acc + jnp.tanh(x / z)
        return lax.fori_loop(0, 6, body, jnp.zeros(32, jnp.float32))

    x = np.full(32, 1.5, np.float32)
    kernel = pj.kernel(fn)
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(x)), np.asarray(jax.jit(fn)(x)))
    np.testing.assert_array_equal(np.asarray(jax.jit(kernel)(x)), np.asarray(kernel(x)))


def test_two_loops_in_a_row_with_one_body_roll_as_two():
    def twice(x, y):
        body = lambda c, r: (c * 0.9 + r, None)            # noqa: E731 - the trips of both scans alike
        c, _ = lax.scan(body, x[0], x)
        return lax.scan(body, c, y)[0]

    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((2, 20, 32)).astype(np.float32)
    kernel = pj.kernel(twice)
    hlo = jax.jit(kernel).lower(x, y).as_text()
    assert "callback" not in hlo and _loops(hlo) == 2
    assert_replay_matches(jax.jit(kernel)(x, y), kernel(x, y))


def test_a_bounds_checked_row_load_and_store_in_a_loop_select_rather_than_branch():
    """A dynamic row read or written in a loop is guarded by its bounds check (``scf.if``); the
    replay evaluates a guard's few instructions and selects (a ``lax.cond`` is a call of its own in
    every trip), so a store whose row is out of bounds must still write nothing."""
    def fn(x, idx):
        def body(i, out):
            row = x.at[idx[i]].get(mode="fill", fill_value=-0.0)
            return out.at[idx[i] - 3].set(jnp.tanh(row), mode="drop")
        return lax.fori_loop(0, idx.shape[0], body, jnp.full_like(x, 7.0))

    x = np.random.default_rng(4).standard_normal((16, 32)).astype(np.float32)
    idx = np.array([0, 5, 99, 3, 15, -40, 20, 7, 2, 16], np.int32)   # rows out of bounds read, dropped
    kernel = pj.kernel(fn)
    hlo = jax.jit(kernel).lower(x, idx).as_text()
    assert "callback" not in hlo and _loops(hlo) == 1 and "stablehlo.case" not in hlo
    got = jax.jit(kernel)(x, idx)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(kernel(x, idx)))
    np.testing.assert_allclose(np.asarray(got), np.asarray(jax.jit(fn)(x, idx)), rtol=2e-6, atol=1e-7)
