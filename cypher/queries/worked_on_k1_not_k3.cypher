// What worked on K1 but not on K3.
// Thoughts whose measured mean speedup (geometric mean over correct experiences, docs/CYPHER.md "Measured
// effect") reaches min_speedup on the first target and stays below it on the second: candidates for
// target-specific tuning. Swap the targets for the opposite question. Judged over the competent baseline
// where both edges have it, else over plain -O3 (edges recorded before the competent figure); both shown.
// @param good_target: string = "k1-x60"  target where the thought worked
// @param bad_target: string = "k3-x100"  target where it did not
// @param min_speedup: float = 1.05  what "worked" means
// @param limit: int = 25  maximum rows
MATCH (t:Thought)-[a:EFFECT_ON]->(:Target {key: $good_target})
MATCH (t)-[b:EFFECT_ON]->(:Target {key: $bad_target})
WHERE a.correct > 0 AND b.trials > 0
WITH t, a, b, exp(a.sum_log_speedup / a.correct) AS o3_good,
     CASE WHEN b.correct > 0 THEN exp(b.sum_log_speedup / b.correct) ELSE 0.0 END AS o3_bad,
     CASE WHEN a.competent_correct > 0 THEN exp(a.sum_log_competent / a.competent_correct) END AS c_good,
     CASE WHEN b.competent_correct > 0 THEN exp(b.sum_log_competent / b.competent_correct) END AS c_bad
WITH t, a, b, o3_good, o3_bad, c_good, c_bad,
     c_good IS NOT NULL AND (c_bad IS NOT NULL OR b.correct = 0) AS by_competent
WITH t, a, b, o3_good, o3_bad, c_good, c_bad,
     CASE WHEN by_competent THEN c_good ELSE o3_good END AS on_good,
     CASE WHEN by_competent THEN coalesce(c_bad, 0.0) ELSE o3_bad END AS on_bad
WHERE on_good >= $min_speedup AND on_bad < $min_speedup
RETURN t.id AS thought, t.title AS title, t.technique AS technique, t.operator AS operator,
       round(c_good, 3) AS competent_good, round(o3_good, 3) AS o3_good, a.trials AS trials_good,
       a.correct AS correct_good, round(c_bad, 3) AS competent_bad,
       CASE WHEN b.correct > 0 THEN round(o3_bad, 3) END AS o3_bad, b.trials AS trials_bad,
       b.correct AS correct_bad
ORDER BY on_good DESC, thought
LIMIT $limit
