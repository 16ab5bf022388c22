// Tasks similar to a task.
// SIMILAR_TO neighbours (either direction) with their weight, operator and the best speedup reached on
// them so far on any target, over the competent baseline, then over plain -O3.
// @param task: string  task id (required)
MATCH (:Task {id: $task})-[s:SIMILAR_TO]-(b:Task)
WHERE b.id <> $task
WITH b, max(s.weight) AS weight
OPTIONAL MATCH (x:Experience {status: 'ok'})-[:FOR_TASK]->(b)
RETURN b.id AS task, b.operator AS operator, b.dtype AS dtype, round(weight, 3) AS weight,
       count(x) AS passed_experiences, round(max(x.competent_speedup), 3) AS best_over_competent,
       round(max(x.speedup), 3) AS best_over_o3
ORDER BY weight DESC, task
