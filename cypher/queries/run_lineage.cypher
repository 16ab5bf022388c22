// Lineage of a run's best kernel, root first.
// Walks DERIVED_FROM from the run's best experience back to the candidate it started from and shows, per
// generation, what was applied: thoughts, their ideas and the commits that evidence them, and each step's
// speedup over the competent baseline, then over plain -O3.
// @param run_id: string  the run id (required)
MATCH (r:Run {id: $run_id})
MATCH (best:Experience {id: r.best_experience_id})
MATCH path = (best)-[:DERIVED_FROM*0..100]->(root:Experience)
WHERE NOT (root)-[:DERIVED_FROM]->(:Experience)
WITH path ORDER BY length(path) DESC LIMIT 1
UNWIND range(0, length(path)) AS depth
WITH nodes(path)[depth] AS x, length(path) - depth AS generation
OPTIONAL MATCH (x)-[:APPLIED]->(t:Thought)
OPTIONAL MATCH (i:Idea)-[:HAS_THOUGHT]->(t)
OPTIONAL MATCH (t)-[:EVIDENCED_BY]->(c:Commit)
RETURN generation, x.id AS experience, x.step AS step, x.status AS status,
       round(x.competent_speedup, 3) AS over_competent, round(x.speedup, 3) AS over_o3,
       collect(DISTINCT t.title) AS thoughts, collect(DISTINCT i.title) AS ideas,
       collect(DISTINCT c.repo + '@' + left(c.sha, 10))[..5] AS evidence
ORDER BY generation
