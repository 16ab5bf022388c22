// Optimization commits per ISA per repository over time.
// Counts commits classified as optimizations by repository, ISA (generic when none was detected) and the
// year they were authored.
// @param repo: string = null  only this repository (null: all)
MATCH (c:Commit)-[:IN_REPO]->(r:Repository)
WHERE coalesce(c.is_optimization, false) AND ($repo IS NULL OR r.name = $repo)
UNWIND CASE WHEN size(coalesce(c.isas, [])) = 0 THEN ['generic'] ELSE c.isas END AS isa
RETURN r.name AS repository, isa, date(c.authored_at).year AS year, count(*) AS commits
ORDER BY repository, isa, year
