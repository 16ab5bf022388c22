// Untried thoughts for an operator.
// Thoughts for the operator that no experience has applied on the target yet, most evidenced first: where
// the agent (or a person) could look next.
// @param operator: string = "gemv"  operator family (see knowledge.taxonomy.Operator)
// @param target: string = "k1-x60"  target key
// @param isa: string = null  only this ISA (null: all)
// @param limit: int = 20  maximum rows
MATCH (t:Thought {operator: $operator})
WHERE ($isa IS NULL OR t.isa = $isa)
  AND NOT EXISTS { MATCH (t)-[e:EFFECT_ON]->(:Target {key: $target}) WHERE e.trials > 0 }
  AND NOT EXISTS { MATCH (x:Experience)-[:APPLIED]->(t) WHERE x.target_key = $target }
OPTIONAL MATCH (i:Idea)-[:HAS_THOUGHT]->(t)
RETURN t.id AS thought, t.title AS title, i.title AS idea, t.technique AS technique, t.isa AS isa,
       t.evidence_commits AS evidence_commits, t.prior_speedup AS prior_speedup
ORDER BY evidence_commits DESC, coalesce(prior_speedup, 1.0) DESC, thought
LIMIT $limit
