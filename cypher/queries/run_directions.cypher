// Most productive directions of a run.
// Each direction is an idea the agent explored in parallel; per direction: evaluations, how many passed,
// the best and the geometric-mean speedup of the passing ones, over the competent baseline, then over plain -O3.
// @param run_id: string  the run id (required)
MATCH (x:Experience)-[:IN_RUN]->(:Run {id: $run_id})
WITH coalesce(x.direction, '(none)') AS direction, count(x) AS evaluations,
     sum(CASE WHEN x.status = 'ok' THEN 1 ELSE 0 END) AS passed,
     max(CASE WHEN x.status = 'ok' THEN x.speedup END) AS best,
     max(CASE WHEN x.status = 'ok' THEN x.competent_speedup END) AS best_competent,
     avg(CASE WHEN x.status = 'ok' AND x.competent_speedup > 0 THEN log(x.competent_speedup) END) AS mean_log_c,
     avg(CASE WHEN x.status = 'ok' AND x.speedup > 0 THEN log(x.speedup) END) AS mean_log
OPTIONAL MATCH (i:Idea {id: direction})
RETURN direction, i.title AS idea, evaluations, passed, round(best_competent, 3) AS best_over_competent,
       round(best, 3) AS best_over_o3, round(exp(mean_log_c), 3) AS mean_over_competent,
       round(exp(mean_log), 3) AS mean_over_o3
ORDER BY coalesce(best, 0) DESC, passed DESC, direction
