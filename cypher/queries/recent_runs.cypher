// Recent agent runs.
// Runs newest first with their status, budget, evaluations recorded in the graph and best speedup.
// @param status: string = null  only runs with this status (queued, running, done, failed, cancelled, interrupted)
// @param limit: int = 20  maximum rows
MATCH (r:Run)
WHERE $status IS NULL OR r.status = $status
OPTIONAL MATCH (x:Experience)-[:IN_RUN]->(r)
WITH r, count(x) AS evaluations
RETURN r.id AS run, r.task_id AS task, r.target_key AS target, r.status AS status, r.budget AS budget,
       evaluations, round(r.best_speedup, 3) AS best_speedup, r.generator AS generator,
       toString(r.started_at) AS started_at
ORDER BY r.started_at DESC, run
LIMIT $limit
