// Most productive directions of a run.
// Each direction is an idea the agent explored in parallel; per direction: evaluations, how many passed,
// the best and the geometric-mean speedup of the passing ones.
// @param run_id: string  the run id (required)
MATCH (x:Experience)-[:IN_RUN]->(:Run {id: $run_id})
WITH coalesce(x.direction, '(none)') AS direction, count(x) AS evaluations,
     sum(CASE WHEN x.status = 'ok' THEN 1 ELSE 0 END) AS passed,
     max(CASE WHEN x.status = 'ok' THEN x.speedup END) AS best,
     avg(CASE WHEN x.status = 'ok' AND x.speedup > 0 THEN log(x.speedup) END) AS mean_log
OPTIONAL MATCH (i:Idea {id: direction})
RETURN direction, i.title AS idea, evaluations, passed, round(best, 3) AS best_speedup,
       round(exp(mean_log), 3) AS mean_speedup
ORDER BY coalesce(best, 0) DESC, passed DESC, direction
