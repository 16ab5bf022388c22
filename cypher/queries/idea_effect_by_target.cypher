// Ideas by measured effect per target.
// Pools the EFFECT_ON counters of every thought under each idea, per target: which principles pay off
// where. mean_over_competent (over the task's competent baseline), mean_over_o3 (over plain -O3) and mean_gain
// (over the parent) are geometric means over the correct experiences (docs/CYPHER.md, "Measured effect").
// @param min_trials: int = 1  leave out (idea, target) pairs tried fewer times
// @param limit: int = 50  maximum rows
MATCH (i:Idea)-[:HAS_THOUGHT]->(:Thought)-[e:EFFECT_ON]->(g:Target)
WITH i, g, sum(e.trials) AS trials, sum(e.correct) AS correct, sum(e.successes) AS successes,
     sum(e.sum_log_speedup) AS sum_log_speedup, sum(e.sum_log_gain) AS sum_log_gain,
     sum(coalesce(e.competent_correct, 0)) AS competent, sum(coalesce(e.sum_log_competent, 0.0)) AS sum_log_competent
WHERE trials >= $min_trials AND trials > 0
WITH i, g, trials, correct, successes,
     CASE WHEN competent > 0 THEN exp(sum_log_competent / competent) END AS mean_competent,
     CASE WHEN correct > 0 THEN exp(sum_log_speedup / correct) END AS mean_speedup,
     CASE WHEN correct > 0 THEN exp(sum_log_gain / correct) END AS mean_gain
RETURN i.id AS idea, i.title AS title, g.key AS target, trials, correct, successes,
       round(mean_competent, 3) AS mean_over_competent, round(mean_speedup, 3) AS mean_over_o3,
       round(mean_gain, 3) AS mean_gain,
       round(toFloat(successes) / trials, 2) AS success_rate
ORDER BY coalesce(mean_competent, 0.0) DESC, coalesce(mean_speedup, 0.0) DESC, trials DESC, idea
LIMIT $limit
