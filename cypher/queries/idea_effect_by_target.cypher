// Ideas by measured effect per target.
// Sums the EFFECT_ON statistics of every thought under each idea, per target: which principles pay off
// where.
// @param min_trials: int = 1  leave out (idea, target) pairs tried fewer times
// @param limit: int = 50  maximum rows
MATCH (i:Idea)-[:HAS_THOUGHT]->(:Thought)-[e:EFFECT_ON]->(g:Target)
WITH i, g, sum(e.trials) AS trials, sum(e.successes) AS successes, sum(e.sum_log_speedup) AS sum_log
WHERE trials >= $min_trials AND trials > 0
RETURN i.id AS idea, i.title AS title, g.key AS target, trials, successes,
       round(exp(sum_log / trials), 3) AS mean_speedup, round(toFloat(successes) / trials, 2) AS success_rate
ORDER BY mean_speedup DESC, trials DESC, idea
LIMIT $limit
