"""The programs that put the parts together on one machine (``nbjobs.programs``).

``nbjobs demo`` (:mod:`.demo`, with its mail inbox :mod:`.demo_inbox`) and ``nbjobs
install`` (:mod:`.install`) each assemble a hub (``hub_config``), the job service
(``job_service``) and the spawners from the shared base (``nbjobs``: configuration,
models, storage). They sit above every part: no part and nothing of the base imports
them (``tests/common/test_layout.py``).
"""
