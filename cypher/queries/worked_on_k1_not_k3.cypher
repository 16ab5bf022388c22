// What worked on K1 but not on K3.
// Thoughts whose measured mean_speedup (geometric mean over correct experiences of the speedup over the
// task's baseline, docs/CYPHER.md "Measured effect") reaches min_speedup on the first target and stays below
// it on the second: candidates for target-specific tuning. Swap the targets for the opposite question.
// @param good_target: string = "k1-x60"  target where the thought worked
// @param bad_target: string = "k3-x100"  target where it did not
// @param min_speedup: float = 1.05  what "worked" means
// @param limit: int = 25  maximum rows
MATCH (t:Thought)-[a:EFFECT_ON]->(:Target {key: $good_target})
MATCH (t)-[b:EFFECT_ON]->(:Target {key: $bad_target})
WHERE a.correct > 0 AND b.trials > 0
WITH t, a, b, exp(a.sum_log_speedup / a.correct) AS on_good,
     CASE WHEN b.correct > 0 THEN exp(b.sum_log_speedup / b.correct) ELSE 0.0 END AS on_bad
WHERE on_good >= $min_speedup AND on_bad < $min_speedup
RETURN t.id AS thought, t.title AS title, t.technique AS technique, t.operator AS operator,
       round(on_good, 3) AS speedup_good, a.trials AS trials_good, a.correct AS correct_good,
       CASE WHEN b.correct > 0 THEN round(on_bad, 3) END AS speedup_bad, b.trials AS trials_bad,
       b.correct AS correct_bad
ORDER BY on_good DESC, thought
LIMIT $limit
