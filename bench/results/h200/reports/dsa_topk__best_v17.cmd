python3 -m gpu_worker evaluate --target dsa_topk --candidate gpu_worker/candidates/dsa_topk/best.py --profile full --out /root/out/h200/reports/dsa_topk__best.json
