// A deployment's traffic between two readings of its counters (GET /v1/deployments/N/stats):
// requests a second, and latency percentiles over that interval from the histogram's buckets.

const answered = (reading) => Object.values(reading.requests || {}).reduce((a, b) => a + b, 0);

/** The latency (seconds) under which a share `q` of the interval's requests fell, read off
 * cumulative buckets `[[le, count], …]` by linear interpolation inside the bucket; null with
 * no request. */
export function quantile(buckets, q) {
  const total = buckets.length ? buckets[buckets.length - 1][1] : 0;
  if (!total) return null;
  const wanted = q * total;
  let lower = 0;
  let below = 0;
  for (const [le, cumulative] of buckets) {
    const upper = le === "+Inf" ? lower : Number(le);
    if (cumulative >= wanted) {
      const inBucket = cumulative - below;
      return inBucket ? lower + ((upper - lower) * (wanted - below)) / inBucket : upper;
    }
    lower = upper;
    below = cumulative;
  }
  return lower;
}

/** Rate and latency between `before` and `after`; null until there are two readings. */
export function traffic(before, after) {
  if (!before || !after || after.at <= before.at) return null;
  const seconds = after.at - before.at;
  const previous = new Map((before.buckets || []).map(([le, n]) => [le, n]));
  const buckets = (after.buckets || []).map(([le, n]) => [le, Math.max(0, n - (previous.get(le) || 0))]);
  const requests = Math.max(0, answered(after) - answered(before));
  return {
    rate: requests / seconds,
    p50: quantile(buckets, 0.5),
    p99: quantile(buckets, 0.99),
    inflight: after.inflight ?? 0,
    waiting: after.waiting ?? 0,
    mean: after.count ? after.sum / after.count : null,
  };
}
