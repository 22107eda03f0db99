namespace headgrad { int models_placeholder_ = 0; }
