// Decisions carried from one target or task to another, with the outcome on both sides.
// Each row is one TRANSFERS_TO edge: an offline kernel's knob decision measured on one target or task, re-rendered
// for another (LMUL rescaled for its VLEN or moved as other tasks' best moved between the two targets, knobs moved
// by technique onto another family: agent/transfer.py) and measured there; speedups over plain -O3 on each side.
// @param to_target: string = null  only transfers into this target (null: every target)
MATCH (src:Experience)-[t:TRANSFERS_TO]->(x:Experience)
WHERE $to_target IS NULL OR x.target_key = $to_target
RETURN t.from_target AS from_target, x.target_key AS to_target, t.from_task AS from_task, x.task_id AS to_task,
       t.via AS via, t.decision AS decision, t.applied AS applied, t.rescaled AS rescaled,
       round(t.from_speedup, 3) AS from_over_o3, round(x.speedup, 3) AS to_over_o3, x.status AS to_status,
       x.run_id AS run
ORDER BY from_target, to_target, from_task, run
