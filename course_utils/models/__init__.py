"""The trainable models the demos use, student-safe and shipped with the course.

* `seq2seq`: the GRU encoder–decoder with or without Bahdanau attention (notebook 04);
* `tiny_lm`: masked self-attention and the character language model (notebook 08), assembled
  from the student's block, masks and masked softmax where they pass their checks;
* `decoder_lm`: a decoder-only language model whose keys and values are in reach (notebook 11);
* `vit_model`: the tiny Vision Transformer and its baselines (notebook 09), assembled from the
  student's patchify, patch embedding, class token and forward pass where they pass;
* `transformer_seq2seq`: the encoder–decoder Transformer trained on dates (notebook 10).

None of them holds an exercise's answer in a form the exercise could call: each exercise's
hidden tests forbid the functions here that compute the same thing.
"""
