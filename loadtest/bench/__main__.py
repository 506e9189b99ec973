from loadtest.bench import app

app()
