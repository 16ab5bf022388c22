// Recent agent runs.
// Runs newest first with their status, budget, evaluations recorded in the graph and the best kernel's speedup
// over the competent baseline, then over plain -O3 (docs/TASKS.md, "Two baselines"); baseline_note says when
// the baselines are weak (a reference calling scalar libm).
// @param status: string = null  only runs with this status (queued, running, done, failed, cancelled, interrupted)
// @param limit: int = 20  maximum rows
MATCH (r:Run)
WHERE $status IS NULL OR r.status = $status
OPTIONAL MATCH (x:Experience)-[:IN_RUN]->(r)
WITH r, count(x) AS evaluations
RETURN r.id AS run, r.task_id AS task, r.target_key AS target, r.status AS status, r.budget AS budget,
       evaluations, round(r.best_competent_speedup, 3) AS best_over_competent,
       round(r.best_speedup, 3) AS best_over_o3, r.generator AS generator, toString(r.started_at) AS started_at,
       r.baseline_note AS baseline_note
ORDER BY r.started_at DESC, run
LIMIT $limit
