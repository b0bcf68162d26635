"""The grading runtime: the grader that claims a stored submission, grades it through the jail and
the verifier child and stores the verdict (`grader`), the queues that carry submission ids to it
(`queue` in process, `redis_jobs` with Dramatiq when scaled out), the sweeper that enqueues again
what a dead worker held (`sweeper`), and the waits for verdicts (`waits`)."""
