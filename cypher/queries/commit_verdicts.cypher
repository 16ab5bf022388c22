// Per-commit verdicts of the miner: optimization or not, with the score and the reasons behind it.
// Every candidate commit (the miner read its patch) with its score, verdict, ISAs, operators, techniques,
// believable and flagged speedup figures, and the signed reasons that add up to the score.
// @param repo: string = null  only this repository (null: all)
// @param verdict: string = null  "optimization" or "other" (null: both)
// @param limit: int = 200  at most this many commits, newest first
MATCH (c:Commit)-[:IN_REPO]->(r:Repository)
WHERE ($repo IS NULL OR r.name = $repo)
  AND ($verdict IS NULL OR ($verdict = 'optimization') = coalesce(c.is_optimization, false))
RETURN r.name AS repository, c.sha AS sha, c.title AS title,
       CASE WHEN coalesce(c.is_optimization, false) THEN 'optimization' ELSE 'other' END AS verdict,
       c.score AS score, c.isas AS isas, c.operators AS operators, c.techniques AS techniques,
       c.perf_claims AS claims, c.claim_spans AS claim_spans, c.flagged_claims AS flagged, c.reasons AS reasons
ORDER BY c.authored_at DESC
LIMIT $limit
