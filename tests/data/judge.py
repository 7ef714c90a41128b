#!/usr/bin/env python3
"""A scripted judge for jev's exec backend, used by the integration tests.

Reads one request per line on stdin ({id, model, questions, state}), logs what it was asked
to the file named by argv[1] (one JSON line per request), and answers every question:
noul -> 0.7 (or JUDGE_NOUL), choice/score -> all probability on the first label.
JUDGE_SLEEP (seconds) delays each answer; JUDGE_FAIL_ID makes the request with that id fail.
"""
import json
import os
import sys
import time

log_path = sys.argv[1]
sleep = float(os.environ.get("JUDGE_SLEEP", "0"))
noul = float(os.environ.get("JUDGE_NOUL", "0.7"))
fail_id = os.environ.get("JUDGE_FAIL_ID")

for line in sys.stdin:
    req = json.loads(line)
    with open(log_path, "a") as log:
        log.write(json.dumps({"id": req["id"], "questions": sorted(req["questions"]), "state": req["state"]}) + "\n")
    if sleep:
        time.sleep(sleep)
    if req["id"] == fail_id:
        print(json.dumps({"id": req["id"], "error": "scripted failure"}), flush=True)
        continue
    answers = {}
    for qid, q in req["questions"].items():
        if q["type"] == "noul":
            answers[qid] = {"type": "noul", "noul": noul}
        else:
            labels = list(q["criteria"].keys())
            probs = {label: (1.0 if i == 0 else 0.0) for i, label in enumerate(labels)}
            answers[qid] = {"type": q["type"], q["type"]: labels[0], "confidence": 1.0, "probabilities": probs}
    print(json.dumps({"id": req["id"], "model": "scripted-judge-1", "answers": answers}), flush=True)
