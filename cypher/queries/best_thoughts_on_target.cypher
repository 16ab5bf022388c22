// Best thoughts by measured speedup on a target.
// Ranks thoughts by the geometric-mean speedup of the experiences that applied them on the target, read
// from the EFFECT_ON statistics the agent keeps per (thought, target).
// @param target: string = "k1-x60"  target key
// @param min_trials: int = 1  leave out thoughts tried fewer times than this
// @param limit: int = 20  maximum rows
MATCH (t:Thought)-[e:EFFECT_ON]->(:Target {key: $target})
WHERE e.trials >= $min_trials AND e.trials > 0
OPTIONAL MATCH (i:Idea)-[:HAS_THOUGHT]->(t)
RETURN t.id AS thought, t.title AS title, i.title AS idea, t.technique AS technique, t.operator AS operator,
       e.trials AS trials, e.successes AS successes,
       round(exp(e.sum_log_speedup / e.trials), 3) AS mean_speedup,
       round(toFloat(e.successes) / e.trials, 2) AS success_rate
ORDER BY mean_speedup DESC, trials DESC, thought
LIMIT $limit
