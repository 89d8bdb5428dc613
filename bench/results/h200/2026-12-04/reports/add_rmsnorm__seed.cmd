python3 -m gpu_worker evaluate --target add_rmsnorm --candidate gpu_worker/candidates/add_rmsnorm/seed.py --profile full --out /root/out/reports/add_rmsnorm__seed.json
