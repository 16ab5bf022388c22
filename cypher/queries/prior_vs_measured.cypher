// Thoughts whose mined prior and measured effect disagree.
// The prior is the gain claimed by the commits that evidence a thought ("1.5x faster" than before); the
// measured gain is its like on the target: the geometric mean of speedup / parent speedup over the correct
// experiences that applied it (docs/CYPHER.md, "Measured effect"). "overpromised": history claimed more
// than we measured; "underrated": it does better here than its history says.
// @param target: string = "k1-x60"  target key
// @param min_trials: int = 2  trust measurements only from this many correct trials
// @param min_gap: float = 0.1  minimum |ln(prior) - mean ln(gain)|
// @param limit: int = 25  maximum rows
MATCH (t:Thought)-[e:EFFECT_ON]->(:Target {key: $target})
WHERE e.correct >= $min_trials AND e.correct > 0
WITH t, e, coalesce(t.prior_speedup, 1.0) AS prior, e.sum_log_gain / e.correct AS measured_log
WITH t, e, prior, measured_log, log(prior) - measured_log AS gap
WHERE abs(gap) >= $min_gap
RETURN t.id AS thought, t.title AS title, t.evidence_commits AS evidence_commits,
       round(prior, 3) AS prior_gain, round(exp(measured_log), 3) AS measured_gain, e.trials AS trials,
       e.correct AS correct, CASE WHEN gap > 0 THEN 'overpromised' ELSE 'underrated' END AS verdict
ORDER BY abs(gap) DESC, thought
LIMIT $limit
