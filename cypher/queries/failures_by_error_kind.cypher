// Failed attempts by error kind.
// Groups experiences that did not pass by status (compile_error, compiler_crash, compile_timeout, too_large,
// wrong, timeout, crashed, rejected, memory, state_across_calls, invalid_output, sandbox_violation,
// generalization_failed, generation_error) and by the first error line of their feedback, with example
// experiences to open.
// @param target: string = null  only this target (null: all)
// @param task: string = null  only this task (null: all)
// @param limit: int = 50  maximum rows
MATCH (x:Experience)
WHERE x.status <> 'ok' AND ($target IS NULL OR x.target_key = $target) AND ($task IS NULL OR x.task_id = $task)
WITH x, trim(split(coalesce(x.feedback, ''), '\n')[0]) AS line
WITH x, left(CASE WHEN line CONTAINS 'error:' THEN trim(split(line, 'error:')[1]) ELSE line END, 120) AS reason
RETURN x.status AS status, reason, count(x) AS attempts, collect(DISTINCT x.task_id)[..5] AS tasks,
       collect(x.id)[..3] AS examples
ORDER BY attempts DESC, status, reason
LIMIT $limit
