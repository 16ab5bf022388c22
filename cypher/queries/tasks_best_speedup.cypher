// Experiences per task with the best speedup.
// Per (task, target): how many candidates were evaluated, how many passed, and the best passing one with its
// speedup over the competent baseline, then over plain -O3.
// @param target: string = null  only this target (null: all)
MATCH (x:Experience)-[:FOR_TASK]->(k:Task)
WHERE $target IS NULL OR x.target_key = $target
WITH k, x ORDER BY CASE WHEN x.status = 'ok' THEN coalesce(x.speedup, 0.0) ELSE -1.0 END DESC
WITH k, x.target_key AS target, count(x) AS experiences,
     sum(CASE WHEN x.status = 'ok' THEN 1 ELSE 0 END) AS passed, collect(x)[0] AS top
RETURN k.id AS task, k.operator AS operator, target, experiences, passed,
       CASE WHEN top.status = 'ok' THEN round(top.competent_speedup, 3) END AS best_over_competent,
       CASE WHEN top.status = 'ok' THEN round(top.speedup, 3) END AS best_over_o3,
       CASE WHEN top.status = 'ok' THEN top.id END AS best_experience
ORDER BY task, target
