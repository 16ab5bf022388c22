// Targets similar to a target.
// SIMILAR_TO neighbours (either direction) with their weight and how many experiences each holds, i.e.
// where measurements can be borrowed from when the target itself has few.
// @param target: string = "k1-x60"  target key
MATCH (:Target {key: $target})-[s:SIMILAR_TO]-(b:Target)
WHERE b.key <> $target
WITH b, max(s.weight) AS weight
OPTIONAL MATCH (x:Experience)-[:ON_TARGET]->(b)
RETURN b.key AS target, b.name AS name, b.isa AS isa, b.vlen AS vlen, round(weight, 3) AS weight,
       count(x) AS experiences
ORDER BY weight DESC, target
