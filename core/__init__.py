"""Cross-cutting pieces every layer may use: settings and the error type users see."""
