"""Verification workers: the Celery GPU worker, the embedded in-process worker, the job process and the
sweeper.

Candidate code only ever runs below a job process (`worker.job_process`, in its sandboxed children by default),
never in the Celery process, the embedded service's API process or anything that serves HTTP.
"""
