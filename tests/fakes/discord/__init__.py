"""A fake Discord (REST API, Gateway, CDN) that discord.py runs against unmodified; see server.py."""
