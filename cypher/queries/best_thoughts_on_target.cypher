// Best thoughts by measured speedup on a target.
// Ranks thoughts by their geometric-mean speedup, over the correct experiences that applied them on the
// target: mean_over_competent over the task's competent baseline (edges recorded before it have none and come
// last), mean_over_o3 over plain -O3; mean_gain is the same over speedup / parent speedup (what the thought
// itself added). Read from EFFECT_ON (docs/CYPHER.md, "Measured effect").
// @param target: string = "k1-x60"  target key
// @param min_trials: int = 1  leave out thoughts tried fewer times than this
// @param limit: int = 20  maximum rows
MATCH (t:Thought)-[e:EFFECT_ON]->(:Target {key: $target})
WHERE e.trials >= $min_trials AND e.trials > 0
OPTIONAL MATCH (i:Idea)-[:HAS_THOUGHT]->(t)
WITH t, i, e, CASE WHEN e.correct > 0 THEN exp(e.sum_log_speedup / e.correct) END AS mean_speedup,
     CASE WHEN e.correct > 0 THEN exp(e.sum_log_gain / e.correct) END AS mean_gain,
     CASE WHEN e.competent_correct > 0 THEN exp(e.sum_log_competent / e.competent_correct) END AS mean_competent
RETURN t.id AS thought, t.title AS title, i.title AS idea, t.technique AS technique, t.operator AS operator,
       e.trials AS trials, e.correct AS correct, e.successes AS successes,
       round(mean_competent, 3) AS mean_over_competent, round(mean_speedup, 3) AS mean_over_o3,
       round(mean_gain, 3) AS mean_gain,
       round(toFloat(e.successes) / e.trials, 2) AS success_rate
ORDER BY coalesce(mean_competent, 0.0) DESC, coalesce(mean_speedup, 0.0) DESC, trials DESC, thought
LIMIT $limit
