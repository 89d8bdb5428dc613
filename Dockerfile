FROM python:3.11-slim
WORKDIR /app
COPY . .
RUN pip install --no-cache-dir -e . && python manage.py collectstatic --noinput
EXPOSE 8000
