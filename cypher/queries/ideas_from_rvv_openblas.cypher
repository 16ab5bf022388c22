// Ideas evidenced by RVV commits in OpenBLAS.
// Follows Idea -> Thought -> Commit -> Repository and keeps commits that touch the ISA in repositories
// whose library tag or name matches; change the parameters for another library or ISA.
// @param library: string = "openblas"  library tag or repository name fragment (case-insensitive)
// @param isa: string = "rvv"  ISA the evidence commits must touch
// @param limit: int = 25  maximum rows
MATCH (i:Idea)-[:HAS_THOUGHT]->(t:Thought)-[:EVIDENCED_BY]->(c:Commit)-[:IN_REPO]->(r:Repository)
WHERE $isa IN c.isas
  AND (toLower(coalesce(r.library, '')) = toLower($library) OR toLower(r.name) CONTAINS toLower($library))
WITH i, count(DISTINCT c) AS commits, count(DISTINCT t) AS thoughts, collect(DISTINCT r.name) AS repositories,
     collect(DISTINCT c.title)[..3] AS example_commits
RETURN i.id AS idea, i.title AS title, commits, thoughts, repositories, example_commits
ORDER BY commits DESC, title
LIMIT $limit
