namespace headgrad { int train_placeholder_ = 0; }
