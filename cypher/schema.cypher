// EoK graph schema, applied at startup by knowledge/migrations.py.
// Each "// migration N: title" header starts a versioned step; steps are idempotent (IF NOT EXISTS) and
// recorded as (:Migration {version}) nodes, so a step runs once per database. Append new steps; never edit
// an applied one.

// migration 1: uniqueness constraints on every node key
CREATE CONSTRAINT repository_name IF NOT EXISTS FOR (n:Repository) REQUIRE n.name IS UNIQUE;
CREATE CONSTRAINT commit_sha IF NOT EXISTS FOR (n:Commit) REQUIRE n.sha IS UNIQUE;
CREATE CONSTRAINT idea_id IF NOT EXISTS FOR (n:Idea) REQUIRE n.id IS UNIQUE;
CREATE CONSTRAINT thought_id IF NOT EXISTS FOR (n:Thought) REQUIRE n.id IS UNIQUE;
CREATE CONSTRAINT target_key IF NOT EXISTS FOR (n:Target) REQUIRE n.key IS UNIQUE;
CREATE CONSTRAINT task_id IF NOT EXISTS FOR (n:Task) REQUIRE n.id IS UNIQUE;
CREATE CONSTRAINT experience_id IF NOT EXISTS FOR (n:Experience) REQUIRE n.id IS UNIQUE;
CREATE CONSTRAINT run_id IF NOT EXISTS FOR (n:Run) REQUIRE n.id IS UNIQUE;
CREATE CONSTRAINT migration_version IF NOT EXISTS FOR (n:Migration) REQUIRE n.version IS UNIQUE;

// migration 2: lookup indexes for the filters retrieval and analysts use
CREATE INDEX thought_filters IF NOT EXISTS FOR (n:Thought) ON (n.technique, n.isa, n.operator);
CREATE INDEX thought_operator IF NOT EXISTS FOR (n:Thought) ON (n.operator);
CREATE INDEX thought_isa IF NOT EXISTS FOR (n:Thought) ON (n.isa);
CREATE INDEX commit_repo IF NOT EXISTS FOR (n:Commit) ON (n.repo);
CREATE INDEX experience_task_target IF NOT EXISTS FOR (n:Experience) ON (n.task_id, n.target_key);
CREATE INDEX experience_status IF NOT EXISTS FOR (n:Experience) ON (n.status);
CREATE INDEX experience_run IF NOT EXISTS FOR (n:Experience) ON (n.run_id);
CREATE INDEX run_status IF NOT EXISTS FOR (n:Run) ON (n.status);

// migration 3: full-text indexes over titles, descriptions, code identifiers and intrinsics
CREATE FULLTEXT INDEX knowledge_text IF NOT EXISTS FOR (n:Thought|Idea) ON EACH [n.title, n.description, n.principle, n.identifiers];
CREATE FULLTEXT INDEX commit_text IF NOT EXISTS FOR (n:Commit) ON EACH [n.title, n.message];
CREATE FULLTEXT INDEX experience_text IF NOT EXISTS FOR (n:Experience) ON EACH [n.summary, n.feedback];

// migration 4: vector indexes on the stored embeddings (384 = all-MiniLM-L6-v2, the bundled default model)
CREATE VECTOR INDEX thought_embedding IF NOT EXISTS FOR (n:Thought) ON n.embedding OPTIONS {indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}};
CREATE VECTOR INDEX idea_embedding IF NOT EXISTS FOR (n:Idea) ON n.embedding OPTIONS {indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}};
CREATE VECTOR INDEX experience_embedding IF NOT EXISTS FOR (n:Experience) ON n.embedding OPTIONS {indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}};

// migration 5: incremental FAISS catch-up reads nodes by embedding generation
CREATE INDEX thought_embedding_gen IF NOT EXISTS FOR (n:Thought) ON (n.embedding_gen);
CREATE INDEX idea_embedding_gen IF NOT EXISTS FOR (n:Idea) ON (n.embedding_gen);
CREATE INDEX experience_embedding_gen IF NOT EXISTS FOR (n:Experience) ON (n.embedding_gen);
CREATE INDEX task_embedding_gen IF NOT EXISTS FOR (n:Task) ON (n.embedding_gen);

// migration 6: vector indexes on embedding_vector
// `embedding` is now float32 bytes (cheap to write; FAISS reads it). The vector indexes read `embedding_vector`,
// a float-list copy that GraphStore.sync_vector_index maintains after writes (eventually consistent).
DROP INDEX thought_embedding IF EXISTS;
DROP INDEX idea_embedding IF EXISTS;
DROP INDEX experience_embedding IF EXISTS;
CREATE VECTOR INDEX thought_embedding_vector IF NOT EXISTS FOR (n:Thought) ON n.embedding_vector OPTIONS {indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}};
CREATE VECTOR INDEX idea_embedding_vector IF NOT EXISTS FOR (n:Idea) ON n.embedding_vector OPTIONS {indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}};
CREATE VECTOR INDEX experience_embedding_vector IF NOT EXISTS FOR (n:Experience) ON n.embedding_vector OPTIONS {indexConfig: {`vector.dimensions`: 384, `vector.similarity_function`: 'cosine'}};

// migration 7: one bookkeeping node per name (concurrent writers MERGE the generation counters)
CREATE CONSTRAINT index_state_name IF NOT EXISTS FOR (n:IndexState) REQUIRE n.name IS UNIQUE;

// migration 8: bootstraps (suite-wide first passes) and their runs
CREATE CONSTRAINT bootstrap_id IF NOT EXISTS FOR (n:Bootstrap) REQUIRE n.id IS UNIQUE;
CREATE INDEX run_bootstrap IF NOT EXISTS FOR (n:Run) ON (n.bootstrap_id);

// migration 9: EFFECT_ON gets one meaning (docs/CYPHER.md "Measured effect")
// Until now sum_log_speedup held the log gain over the parent, summed over correct trials. It moves to
// sum_log_gain, and sum_log_speedup becomes the log speedup over the task's baseline, recomputed exactly from
// the correct experiences that applied the thought on the target (as is `correct`).
MATCH (t:Thought)-[e:EFFECT_ON]->(g:Target) WHERE e.sum_log_gain IS NULL
OPTIONAL MATCH (x:Experience {target_key: g.key, status: 'ok'})-[:APPLIED]->(t) WHERE x.speedup > 0
WITH e, count(x) AS correct, sum(log(x.speedup)) AS sum_log
SET e.sum_log_gain = coalesce(e.sum_log_speedup, 0.0), e.sum_log_speedup = toFloat(sum_log), e.correct = correct;

// migration 10: transfers of a decision between targets and tasks
// (Experience)-[:TRANSFERS_TO]->(Experience) is written when a run starts from a kernel measured on another
// target or task (agent/transfer.py); analysts ask which decisions carried from one target to another.
CREATE INDEX transfer_targets IF NOT EXISTS FOR ()-[t:TRANSFERS_TO]-() ON (t.from_target, t.from_task);
