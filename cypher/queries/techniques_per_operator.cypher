// Techniques per operator.
// How many thoughts each (operator, technique) pair has, how many commits evidence them, and how often
// they were tried and succeeded on any target.
// @param isa: string = null  only thoughts for this ISA (null: every ISA)
MATCH (t:Thought)
WHERE $isa IS NULL OR t.isa = $isa
OPTIONAL MATCH (t)-[e:EFFECT_ON]->(:Target)
WITH t, sum(coalesce(e.trials, 0)) AS trials, sum(coalesce(e.successes, 0)) AS successes
RETURN t.operator AS operator, t.technique AS technique, count(t) AS thoughts,
       sum(t.evidence_commits) AS evidence_commits, sum(trials) AS trials, sum(successes) AS successes
ORDER BY operator, evidence_commits DESC, thoughts DESC, technique
