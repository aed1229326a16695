"""Training beside inference on one GPU: the managed interleaving, its prediction and its decision.

ptui's own formulation (Fulcrum, arXiv 2509.20205, publishes no formula or code; docs/concurrent.md
states the model).  One minibatch runs at a time, training or inference, and nothing is pre-empted.
Requests arrive (Poisson at `rate`, or a recorded trace); with inference batch size b, training
minibatch time t_T and inference minibatch time t_I(k) for k requests, at every minibatch boundary
the scheduler

* runs an inference minibatch of the b oldest requests when b wait, or, when fewer wait, of all of
  them once the oldest has waited longer than the slack  theta = L - max(t_T, t_I(b)) - t_I(b)
  (one more minibatch of either kind, then its own batch, would no longer fit in the budget L);
* else runs a training minibatch.

So without a backlog every request finishes within L when theta >= 0: the oldest is dispatched at
the first boundary after it has waited theta, at most one minibatch later, and then runs.

Prediction (from standalone profiles: t_T, P_T, and t_I(k), P_I(k) at each profiled batch size):
with S_j the arrival of the j-th request of a batch after its oldest (Erlang(j-1, rate)), the
request is in the batch when S_j <= theta (else it opens the next one), so the mean batch is
E[k] = sum_j P(S_j <= theta) (capped at b); inference takes a share u = rate t_I(E[k]) / E[k] of
the GPU, training the rest:  throughput = (1 - u) B_T / t_T,  mean power = u P_I(E[k]) + (1-u) P_T.
A request's wait before its batch is triggered is min(S_b, theta) - S_j, whose survival factorises
(S_b - S_j and S_j are independent):  P(wait > x) = P(Erlang(b-j) > x) P(S_j < theta - x);
then the running minibatch's residual (uniform over t_T with probability 1 - u, over t_I(b) with
probability u), a wait behind other inference batches (Kingman's mean, exponential tail) and the
batch's own t_I(E[k]) are added.  The latency distribution is that
mixture over j, computed on a grid; p50, p99 and the share over budget read from it.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np

from ..catalogue.modes import Mode
from .pareto import InfeasibleError, Table, choose

U_MAX = 0.8            # inference may take at most this share of the GPU (a backlog builds above)
# the latency budget holds when at most 1 % of requests are over it (p99); the decision asks the
# prediction for half that, a margin for the queueing approximation's error
MISS_MAX = 0.005
TAIL_K = 5.0           # tail_margin's scale (inference minibatches per request)
MISS_MARGIN = 0.02     # ... and at most this share over the budget less tail_margin
PREDICT_MAX = 2000     # rows decide checks on the latency distribution before it gives up (~6 ms each)
# measured profiles: a mode's mean power must stay within the budget by this many standard errors
# of its measured power (Standalone.power_se).  A decision over measurements picks the mode that
# measured best, i.e. at the budget's edge and more often one that read low: at the edge, a reading
# 1 se low runs over the budget on the board with probability ~0.16, 2 se ~0.02.
POWER_SE_K = 2.0


@dataclass(frozen=True)
class Standalone:
    """Per-mode profiles of training alone and inference alone (arrays over modes; inference at
    `batches`, columns of infer_ms / infer_w)."""
    modes: list[Mode]
    train_batch: int
    train_ms: np.ndarray
    train_w: np.ndarray
    batches: tuple[int, ...]
    infer_ms: np.ndarray        # (modes, batches)
    infer_w: np.ndarray
    # relative standard error of each mode's measured powers (a profiler's sample spread / sqrt(n));
    # None: the figures are exact (a model's, the simulator's), no power margin
    power_se: np.ndarray | None = None

    def t_inf(self, i: int, k) -> np.ndarray:
        """Inference time of k requests at mode row i: linear between profiled batch sizes."""
        return np.interp(k, self.batches, self.infer_ms[i])

    def p_inf(self, i: int, k) -> np.ndarray:
        return np.interp(k, self.batches, self.infer_w[i])

    @staticmethod
    def stack(parts) -> Standalone:
        """One Standalone of several over the same batches (e.g. the modes a walk profiled)."""
        ps = list(parts)
        a = ps[0]
        se = (None if all(p.power_se is None for p in ps) else
              np.concatenate([np.zeros(len(p.modes)) if p.power_se is None else p.power_se for p in ps]))
        return Standalone([m for p in ps for m in p.modes], a.train_batch,
                          np.concatenate([p.train_ms for p in ps]), np.concatenate([p.train_w for p in ps]),
                          a.batches, np.concatenate([p.infer_ms for p in ps]),
                          np.concatenate([p.infer_w for p in ps]), se)

    def power_margin(self, rows=None) -> np.ndarray:
        """Per mode row, the factor (>= 1) a decision multiplies the mean power by before it
        compares it with the budget: 1 + POWER_SE_K x power_se (1 where the figures are exact)."""
        rows = np.arange(len(self.modes)) if rows is None else np.asarray(rows)
        if self.power_se is None:
            return np.ones(len(rows))
        return 1.0 + POWER_SE_K * np.maximum(np.asarray(self.power_se, float)[rows], 0.0)


@dataclass(frozen=True)
class Prediction:
    p50_ms: float
    p99_ms: float
    over_budget: float          # share of requests over the latency budget
    train_sps: float            # training samples per second
    power_w: float              # mean board power
    infer_share: float          # share of GPU time spent on inference
    mean_batch: float           # requests per inference minibatch
    over_margin: float = 0.0    # share of requests over the budget less tail_margin (decide's test)


def tail_margin(u: float, mean_k: float, t_inf_ms: float, latency_ms: float) -> float:
    """The share of the latency budget the decision holds back when it reads the predicted tail:
    TAIL_K u t_I(b) / (E[k] L), TAIL_K inference minibatches' worth of time per request, weighted
    by the inference share.  The queueing term under-predicts the tail where inference batches
    queue behind each other: a busy GPU (share u) serving long (t_I(b)) small (E[k]) batches.
    Elsewhere the margin is a few per cent of L or less (the dispatch rule keeps requests within L
    without a backlog; a margin in units of L would refuse those rows for the mass the rule puts
    just under L).  Calibrated against simulate() on rows of other rates and budgets than the
    sweep's (docs/concurrent.md, section 3)."""
    return TAIL_K * u * t_inf_ms / (max(mean_k, 1.0) * latency_ms)


def slack(t_train, t_inf_b, latency_ms):
    """theta: how long the oldest request may wait before its batch must start."""
    return latency_ms - np.maximum(t_train, t_inf_b) - t_inf_b


@functools.lru_cache(maxsize=256)
def _counts(m: int) -> tuple[np.ndarray, np.ndarray]:
    """(0..m, log r! for each) as floats: every Poisson term of a decision needs them."""
    r = np.arange(m + 1, dtype=float)
    r.flags.writeable = False
    lg = np.array([math.lgamma(k + 1) for k in range(m + 1)])
    lg.flags.writeable = False
    return r, lg


def _pois_cdfs(m: int, mu) -> np.ndarray:
    """P(Poisson(mu) <= r) for r = 0..m, one row per r (m + 1 rows; none when m < 0), each row
    elementwise over mu.  The terms are summed in order, so row r is what summing its r + 1 terms
    one by one gives, for every r at once (latency_cdf needs every r: O(m) rows, not O(m^2))."""
    mu = np.asarray(mu, float)
    if m < 0:
        return np.zeros((0, *mu.shape))
    with np.errstate(divide="ignore"):
        logmu = np.log(np.maximum(mu, 1e-300))
    r, lg = _counts(m)
    shape = (m + 1,) + (1,) * mu.ndim
    cdf = np.add.accumulate(np.exp(r.reshape(shape) * logmu - mu - lg.reshape(shape)), axis=0)
    return np.clip(np.where(mu <= 0, 1.0, cdf), 0.0, 1.0)


def mean_batch(rate_per_ms, theta, b: int) -> np.ndarray:
    """E[k] = sum_j P(S_j <= theta), j = 1..b (vectorised over theta)."""
    from scipy.special import gammaincc
    mu = rate_per_ms * np.maximum(np.asarray(theta, float), 0.0)  # also called at theta + R
    # P(S_j <= theta) = P(N >= j - 1), N ~ Poisson(mu): the sum over j is 1 + E[min(N, K)],
    # K = b - 1, and E[min(N, K)] = mu P(N <= K - 2) + K P(N >= K) (as n p(n) = mu p(n - 1)); the
    # Poisson CDF P(N <= m) is gammaincc(m + 1, mu).  Two special functions instead of b terms: the
    # decision evaluates this over the whole grid x 4 points x 3 rounds for every batch size
    if b <= 1:
        return np.ones_like(mu)
    k = b - 1
    below = gammaincc(k - 1, mu) if k >= 2 else np.zeros_like(mu)
    return 1.0 + mu * below + k * (1.0 - gammaincc(k, mu))


def interp_rows(k, xs, ys) -> np.ndarray:
    """np.interp(k[r], xs, ys[r]) for every row r at once (clamped at the ends like np.interp)."""
    xa = np.asarray(xs, float)
    k = np.clip(np.asarray(k, float), xa[0], xa[-1])
    j = np.clip(np.searchsorted(xa, k, side="right") - 1, 0, len(xa) - 2)
    w = (k - xa[j]) / (xa[j + 1] - xa[j])
    r = np.arange(len(k))
    return ys[r, j] * (1.0 - w) + ys[r, j + 1] * w


def throughput_power(st: Standalone, rate: float, latency_ms: float, b: int, rows=None):
    """Vectorised over mode rows: (train samples/s, mean power W, inference share, E[k], theta)."""
    rows = np.arange(len(st.modes)) if rows is None else np.asarray(rows)
    lam = rate / 1000.0
    j = st.batches.index(b)
    tT, pT = st.train_ms[rows], st.train_w[rows]
    tIb = st.infer_ms[rows, j]
    theta = slack(tT, tIb, latency_ms)
    # requests that arrive while the running minibatch ends join the batch: E[k] is taken at
    # theta + R, R the residual (uniform over t_T or t_I(b), weighted by the GPU's shares), which
    # itself depends on u; two rounds settle it
    u = np.zeros(len(rows))
    ek = pI = np.zeros(len(rows))
    quarters = np.array([0.125, 0.375, 0.625, 0.875])[:, None]
    for _ in range(3):
        ek = np.zeros(len(rows))
        r = (1.0 - u) * quarters * tT + u * quarters * tIb
        for part in np.clip(mean_batch(lam, theta + r, b), 1.0, b):   # the four in one pass
            ek += part / 4.0
        tI = interp_rows(ek, st.batches, st.infer_ms[rows])
        pI = interp_rows(ek, st.batches, st.infer_w[rows])
        u = np.minimum(lam * tI / ek, 1.0)
    sps = np.where(u < 1.0, (1.0 - u) * st.train_batch / tT * 1000.0, 0.0)
    pw = np.minimum(u, 1.0) * pI + (1.0 - np.minimum(u, 1.0)) * pT
    return sps, pw, u, ek, theta


def predict(st: Standalone, i: int, rate: float, latency_ms: float, b: int) -> Prediction:
    """The analytic prediction for mode row i and inference batch b (module docstring)."""
    return latency_cdf(st, i, rate, latency_ms, b)[0]


def _box(p: np.ndarray, m: int) -> np.ndarray:
    """The convolution of p with m ones, cut to len(p): a difference of running sums, O(n) where
    np.convolve is O(n m) (a 4,001-point grid: most of a decision's time went there)."""
    c = np.cumsum(p)
    out = c.copy()
    if 0 < m < len(p):
        out[m:] -= c[:-m]
    return out if m > 0 else np.zeros_like(p)


def _conv_fft(p: np.ndarray, k: np.ndarray) -> np.ndarray:
    """np.convolve(p, k)[:len(p)] by FFT: O(n log n) on the 4,001-point grid (np.convolve's O(n^2)
    was most of a decision's time); differs from it by rounding, about 1e-16 of the total."""
    n = len(p)
    size = 1 << (2 * n - 1).bit_length()
    return np.fft.irfft(np.fft.rfft(p, size) * np.fft.rfft(k, size), size)[:n]


def latency_cdf(st: Standalone, i: int, rate: float, latency_ms: float,
                b: int) -> tuple[Prediction, np.ndarray, np.ndarray]:
    """predict()'s figures and the predicted latency distribution (latencies ms, their CDF)."""
    sps, pw, u, ek, theta = (float(x[0]) for x in throughput_power(st, rate, latency_ms, b, [i]))
    lam = rate / 1000.0
    tT, tIb, tIk = float(st.train_ms[i]), float(st.t_inf(i, b)), float(st.t_inf(i, ek))
    if u >= 1.0:
        inf = np.array([math.inf])
        return Prediction(math.inf, math.inf, 1.0, 0.0, pw, u, ek, 1.0), inf, np.array([1.0])
    th = max(theta, 0.0)
    # batches queue behind each other when inference is busy: Kingman's G/G/1 mean wait with
    # Erlang(E[k]) batch inter-arrivals (ca^2 = 1/E[k]) and fixed service t_I, less the residual of
    # the batch in service already counted below; a request waits with probability u, the wait
    # taken exponential (the heavy-traffic form)
    wq = max(0.0, u / (1.0 - u) * (1.0 / ek) / 2.0 * tIk - u * tIb / 2.0)
    hi = th + max(tT, tIb) + tIk + 8.0 * wq / max(u, 1e-9) + 1e-9
    x = np.linspace(0.0, hi, 4001)
    dx = x[1] - x[0]
    # pre-trigger wait of a random request: survival, a mixture over its position j
    surv = np.zeros_like(x)
    weight = 0.0
    y = th - x
    in_q = _pois_cdfs(b - 2, np.array([lam * th]))[:, 0]     # row m: P(Poisson <= m), m = jj - 2
    in_x = _pois_cdfs(b - 2, lam * np.maximum(y, 0))
    after = _pois_cdfs(b - 2, lam * x)                      # row m: m = b - jj - 1
    for jj in range(1, b + 1):
        q = 1.0 if jj == 1 else 1.0 - float(in_q[jj - 2])
        if q < 1e-12:
            break
        p_in = np.where(y > 0, 1.0 if jj == 1 else 1.0 - in_x[jj - 2], 0.0)
        surv += (after[b - jj - 1] if jj < b else np.zeros_like(x)) * p_in
        weight += q
    cdf_pre = 1.0 - surv / weight
    # plus the residual of the running minibatch (a uniform mixture), by convolution on the grid
    pdf_pre = np.diff(np.concatenate([[0.0], cdf_pre]))
    pdf = (_box(pdf_pre, int(np.count_nonzero(x < tT))) * ((1.0 - u) * dx / max(tT, dx))
           + _box(pdf_pre, int(np.count_nonzero(x < tIb))) * (u * dx / max(tIb, dx)))
    if wq > 0:
        d_cdf = 1.0 - u * np.exp(-x * u / wq)
        pdf = _conv_fft(pdf, np.diff(np.concatenate([[0.0], d_cdf])))
    cdf = np.cumsum(pdf)
    cdf = np.clip(cdf / max(cdf[-1], 1e-12), 0.0, 1.0)
    lat = x + tIk

    def q_at(p: float) -> float:
        return float(np.interp(p, cdf, lat))
    over = float(1.0 - np.interp(latency_ms, lat, cdf, left=0.0, right=1.0))
    read = latency_ms * (1.0 - tail_margin(u, ek, tIb, latency_ms))
    over_m = float(1.0 - np.interp(read, lat, cdf, left=0.0, right=1.0))
    return (Prediction(q_at(0.5), q_at(0.99), max(over, 0.0), sps, pw, u, ek, max(over_m, 0.0)),
            lat, cdf)


# -- the event-driven check -----------------------------------------------------------------------
def poisson_arrivals(rate: float, horizon_s: float, seed: int = 0) -> np.ndarray:
    """Arrival times (ms) of a Poisson stream at `rate` requests/s over `horizon_s`."""
    rng = np.random.default_rng(seed)
    n = int(rate * horizon_s * 1.2 + 50)
    t = np.cumsum(rng.exponential(1000.0 / rate, n))
    return t[t < horizon_s * 1000.0]


def simulate(st: Standalone, i: int, arrivals_ms: np.ndarray, latency_ms: float, b: int) -> Prediction:
    """Run the schedule event by event over the arrivals (ms): one minibatch at a time, never
    pre-empted, the dispatch rule of the module docstring.  Figures over the arrivals' span."""
    tT, pT = float(st.train_ms[i]), float(st.train_w[i])
    tIb = float(st.t_inf(i, b))
    theta = float(slack(tT, tIb, latency_ms))
    arr = np.asarray(arrivals_ms, float)
    end = float(arr[-1]) if len(arr) else 0.0
    t, head, nxt = 0.0, 0, 0           # queue = arr[head:nxt]
    lat = np.full(len(arr), np.nan)
    energy = t_inf_total = 0.0
    n_train = n_batches = 0
    while t < end or head < len(arr):
        while nxt < len(arr) and arr[nxt] <= t:
            nxt += 1
        q = nxt - head
        if q >= b or (q > 0 and t - arr[head] > theta):
            k = min(b, q)
            d = float(st.t_inf(i, k))
            lat[head:head + k] = t + d - arr[head:head + k]
            head += k
            n_batches += 1
            energy += d * float(st.p_inf(i, k))
            t_inf_total += d
        else:
            d = tT
            n_train += 1
            energy += d * pT
        t += d
    span = max(t, 1e-9)
    lat_ok = lat[np.isfinite(lat)]
    return Prediction(float(np.percentile(lat_ok, 50)), float(np.percentile(lat_ok, 99)),
                      float(np.mean(lat_ok > latency_ms)), n_train * st.train_batch / span * 1000.0,
                      energy / span, t_inf_total / span, float(len(arr)) / max(1, n_batches))


# -- the decision: (mode, b) is one more row of the candidates Table ------------------------------
def candidates(st: Standalone, rate: float, latency_ms: float, rows=None) -> tuple[Table, np.ndarray]:
    """The candidates of a concurrent decision: every (mode, b) as a Table row, time_ms the training
    minibatch's effective time under the interleaving (B_T / throughput), power_w the mean power,
    batch the inference batch; and the mask of rows whose latency budget holds (theta >= 0 and
    inference below U_MAX of the GPU)."""
    rows = np.arange(len(st.modes)) if rows is None else np.asarray(rows)
    tabs, oks = [], []
    for b in st.batches:
        sps, pw, u, _ek, theta = throughput_power(st, rate, latency_ms, b, rows)
        with np.errstate(divide="ignore"):
            t_eff = np.where(sps > 0, st.train_batch / np.maximum(sps, 1e-12) * 1000.0, np.inf)
        z = np.zeros(len(rows))
        tabs.append(Table([st.modes[r] for r in rows], t_eff, pw, z, z.copy()))
        oks.append((theta >= 0) & (u <= U_MAX))
    return Table.concat(tabs, st.batches), np.concatenate(oks)


@dataclass(frozen=True)
class Pick:
    row: int                    # the mode's row in the Standalone
    mode: Mode
    batch: int
    prediction: Prediction


def admitted(pr: Prediction) -> bool:
    """The decision's latency test on a predicted distribution: at most MISS_MAX of requests over
    the budget L, and at most MISS_MARGIN over L less tail_margin (where inference batches queue,
    the analytic tail is short)."""
    return pr.over_budget <= MISS_MAX and pr.over_margin <= MISS_MARGIN


def decide(st: Standalone, rate: float, latency_ms: float, budget_w: float, rows=None) -> Pick:
    """The (mode, b) of highest training throughput whose latency budget holds and whose mean power
    stays within budget_w (pareto.choose over the candidates; measured profiles by POWER_SE_K
    standard errors of their power, Standalone.power_margin); InfeasibleError names the closest."""
    rows = np.arange(len(st.modes)) if rows is None else np.asarray(rows)
    tab, ok = candidates(st, rate, latency_ms, rows)
    # measured profiles: the power each row is held to the budget with (POWER_SE_K standard errors
    # over its measured mean power); the pick's prediction keeps the measured figure
    held = replace(tab, power_w=tab.power_w * np.tile(st.power_margin(rows), len(st.batches)))
    if not ok.any():
        # closest: the (mode, b) with the most slack (the least over its latency budget)
        raise InfeasibleError(f"no mode and inference batch meets {latency_ms:g} ms at "
                              f"{rate:g} requests/s", tab, int(np.argmin(tab.time_ms)))
    # the screen (theta, U_MAX) is necessary, not sufficient: a backlog of inference batches can
    # still push requests over; the pick is checked on the full latency distribution and the next
    # best taken while more than MISS_MAX of requests would be late
    for _ in range(PREDICT_MAX):
        if not ok.any():
            break
        sub = held.subset(ok)
        where = np.flatnonzero(ok)
        try:
            d = choose(sub, budget_w=budget_w, risk=None)
        except InfeasibleError as e:
            raise InfeasibleError(str(e), tab,
                                  None if e.closest is None else int(where[e.closest])) from e
        k = int(where[d.index])
        r = int(rows[k % len(rows)])
        b = int(tab.batches[k])
        pr = predict(st, r, rate, latency_ms, b)
        if admitted(pr):
            return Pick(r, st.modes[r], b, pr)
        ok[k] = False
    raise InfeasibleError(f"no mode and inference batch keeps {1 - MISS_MAX:.1%} of requests within "
                          f"{latency_ms:g} ms at {rate:g} requests/s", tab, int(np.argmin(tab.time_ms)))
