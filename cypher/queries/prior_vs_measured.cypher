// Thoughts whose mined prior and measured effect disagree.
// The prior is the speedup claimed by the commits that evidence a thought; the measured effect is the
// geometric mean over experiences on the target. "overpromised": history claimed more than we measured;
// "underrated": it does better here than its history says.
// @param target: string = "k1-x60"  target key
// @param min_trials: int = 2  trust measurements only from this many trials
// @param min_gap: float = 0.1  minimum |ln(prior) - mean ln(speedup)|
// @param limit: int = 25  maximum rows
MATCH (t:Thought)-[e:EFFECT_ON]->(:Target {key: $target})
WHERE e.trials >= $min_trials AND e.trials > 0
WITH t, e, coalesce(t.prior_speedup, 1.0) AS prior, e.sum_log_speedup / e.trials AS measured_log
WITH t, e, prior, measured_log, log(prior) - measured_log AS gap
WHERE abs(gap) >= $min_gap
RETURN t.id AS thought, t.title AS title, t.evidence_commits AS evidence_commits,
       round(prior, 3) AS prior_speedup, round(exp(measured_log), 3) AS measured_speedup, e.trials AS trials,
       CASE WHEN gap > 0 THEN 'overpromised' ELSE 'underrated' END AS verdict
ORDER BY abs(gap) DESC, thought
LIMIT $limit
