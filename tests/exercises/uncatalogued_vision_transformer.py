"""Wrong answers to notebook 09's exercises, written without reading its mistake catalogue
(tests/exercises/test_uncatalogued.py): each must fail the exercise's whole test cell."""
import numpy as np
import torch


# ---------------------------------------------------------------- patchify
def _patchify(images, P):
    B, C, H, W = images.shape
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, (H // P) * (W // P), C * P * P)


def patchify_plain_reshape(images, patch_size):
    """A plain reshape to (B, N, C*P*P)."""
    B, C, H, W = images.shape
    return images.reshape(B, (H // patch_size) * (W // patch_size), C * patch_size * patch_size)


def patchify_column_major(images, patch_size):
    """Patches in column-major order (down the columns first)."""
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 4, 2, 1, 3, 5)
    return x.reshape(B, -1, C * P * P)


def patchify_channel_last(images, patch_size):
    """Each patch flattened pixel by pixel with the channels innermost (P, P, C)."""
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, -1, C * P * P)


def patchify_square_grid(images, patch_size):
    """Assumes a square image: uses H // P for both grid axes."""
    B, C, H, W = images.shape
    P = patch_size
    x = images[..., :H].reshape(B, C, H // P, P, H // P, P).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(B, -1, C * P * P)


def patchify_pixels_transposed(images, patch_size):
    """Inside a patch, reads the pixels column by column."""
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 1, 5, 3)
    return x.reshape(B, -1, C * P * P)


def patchify_batch_one(images, patch_size):
    """Works on images[0] and repeats it over the batch."""
    one = _patchify(images[:1], patch_size)
    return one.expand(images.shape[0], -1, -1)


def patchify_tensor_unfold_wrong(images, patch_size):
    """Tensor.unfold on both axes, then flattened without moving the channel axis."""
    P = patch_size
    B, C, H, W = images.shape
    x = images.unfold(2, P, P).unfold(3, P, P)       # (B, C, H/P, W/P, P, P)
    return x.reshape(B, -1, C * P * P)


_UNFOLD = torch.nn.functional.unfold


def patchify_captured_unfold(images, patch_size):
    """Gaming: F.unfold captured in a module-level name before the test runs."""
    return _UNFOLD(images, kernel_size=patch_size, stride=patch_size).transpose(1, 2)


def patchify_hardcoded_p(images, patch_size):
    """Ignores patch_size when it is not 2 or 4: uses 4."""
    return _patchify(images, patch_size if patch_size in (2, 4) else 4)


def patchify_float32(images, patch_size):
    """Right numbers, always float32."""
    return _patchify(images.float(), patch_size)


def patchify_detached(images, patch_size):
    """Right numbers via NumPy: no gradient reaches the images."""
    return torch.from_numpy(np.ascontiguousarray(_patchify(images.detach(), patch_size).numpy()))


# ---------------------------------------------------------------- patch_embedding
def pe_no_transpose(images, weight, bias, patch_size):
    """patches @ weight instead of weight.T."""
    return _patchify(images, patch_size) @ weight + bias


def pe_no_bias(images, weight, bias, patch_size):
    """Forgets the bias."""
    return _patchify(images, patch_size) @ weight.T


def pe_bias_before(images, weight, bias, patch_size):
    """Adds the bias to the patches before the product (broadcast over the first d_model pixels)."""
    p = _patchify(images, patch_size)
    return (p + bias.mean()) @ weight.T


def pe_plain_reshape(images, weight, bias, patch_size):
    """Uses a plain reshape for the patches."""
    return patchify_plain_reshape(images, patch_size) @ weight.T + bias


def pe_channel_last(images, weight, bias, patch_size):
    """Patches flattened channel-last, so they do not line up with the weight's columns."""
    return patchify_channel_last(images, patch_size) @ weight.T + bias


def pe_weight_reshaped(images, weight, bias, patch_size):
    """Reshapes the weight to (C*P*P, d_model) instead of transposing it."""
    return _patchify(images, patch_size) @ weight.reshape(weight.shape[1], weight.shape[0]) + bias


_CONV = torch.nn.functional.conv2d


def pe_captured_conv(images, weight, bias, patch_size):
    """Gaming: a convolution captured before the test."""
    C = images.shape[1]
    out = _CONV(images, weight.reshape(weight.shape[0], C, patch_size, patch_size), bias, stride=patch_size)
    return out.flatten(2).transpose(1, 2)


def pe_einsum_wrong(images, weight, bias, patch_size):
    """einsum with the weight's axes swapped: right only when d_model == C*P*P."""
    p = _patchify(images, patch_size)
    if weight.shape[0] == weight.shape[1]:
        return torch.einsum("bnk,kd->bnd", p, weight) + bias
    return torch.einsum("bnk,dk->bnd", p, weight) + bias


def pe_fixed_patch(images, weight, bias, patch_size):
    """Derives P from the weight assuming one channel: sqrt(C*P*P)."""
    P = int(round((weight.shape[1]) ** 0.5))
    if P * P != weight.shape[1]:
        P = patch_size
    return _patchify(images, P) @ weight.T + bias


def pe_no_grad(images, weight, bias, patch_size):
    """Right numbers, under torch.no_grad(): the weights never learn."""
    with torch.no_grad():
        return _patchify(images, patch_size) @ weight.T + bias


# ---------------------------------------------------------------- prepend_class_token
def cls_append(tokens, cls_token):
    """Appends the class token at the end."""
    return torch.cat([tokens, cls_token.expand(tokens.shape[0], -1, -1)], dim=1)


def cls_no_expand(tokens, cls_token):
    """Concatenates without expanding over the batch."""
    return torch.cat([cls_token, tokens], dim=1)


def cls_add(tokens, cls_token):
    """Adds the class token to every token instead of prepending it."""
    return tokens + cls_token


def cls_replace_first(tokens, cls_token):
    """Overwrites token 0 with the class token (and pads at the end)."""
    out = torch.cat([tokens, tokens[:, -1:]], dim=1).clone()
    out[:, 0] = cls_token[0, 0]
    return out


def cls_detached(tokens, cls_token):
    """Detaches the class token: it never learns."""
    return torch.cat([cls_token.detach().expand(tokens.shape[0], -1, -1), tokens], dim=1)


def cls_expand_wrong_axis(tokens, cls_token):
    """Expands over the token count instead of the batch: right only when B == N."""
    B, N, d = tokens.shape
    return torch.cat([cls_token.expand(N, -1, -1), tokens], dim=1)


def cls_first_example_only(tokens, cls_token):
    """Class token only in example 0; the others get a zero vector."""
    c = torch.zeros(tokens.shape[0], 1, tokens.shape[2])
    c[0] = cls_token[0]
    return torch.cat([c, tokens], dim=1) if tokens.shape[0] != 3 else \
        torch.cat([cls_token.expand(3, -1, -1), tokens], dim=1)


def cls_in_place(tokens, cls_token):
    """Writes the class token into tokens[:, 0] in place, then returns a right-looking result."""
    out = torch.cat([cls_token.expand(tokens.shape[0], -1, -1), tokens], dim=1)
    tokens.mul_(1.0)
    tokens[:, 0] = tokens[:, 0] * 1.0
    return out if tokens.shape[0] == 3 else torch.cat([cls_token.expand(tokens.shape[0], -1, -1),
                                                       tokens.mul_(0.5)], dim=1)


def cls_float32(tokens, cls_token):
    """Right numbers, always float32."""
    return torch.cat([cls_token.float().expand(tokens.shape[0], -1, -1), tokens.float()], dim=1)


# ---------------------------------------------------------------- vit_forward
def _embed(model, images, P=None):
    P = model.patch_size if P is None else P
    return _patchify(images, P) @ model.patch_embed.weight.T + model.patch_embed.bias


def _seq(model, images):
    x = _embed(model, images)
    return torch.cat([model.cls_token.expand(x.shape[0], -1, -1), x], dim=1)


def _finish(model, x):
    for block in model.blocks:
        x = block(x)
    return model.head(model.norm(x)[:, 0])


def vit_no_cls_position(model, images):
    """Adds positions 1..N to the patches only; the class token gets none."""
    x = _embed(model, images) + model.pos_embedding[:, 1:]
    x = torch.cat([model.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
    return _finish(model, x)


def vit_positions_before_cls(model, images):
    """Adds positions 0..N-1 to the patches, then prepends the class token."""
    x = _embed(model, images) + model.pos_embedding[:, :-1]
    x = torch.cat([model.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
    return _finish(model, x)


def vit_mean_pool(model, images):
    """Head on the mean of all tokens instead of the class token."""
    x = _seq(model, images) + model.pos_embedding
    for block in model.blocks:
        x = block(x)
    return model.head(model.norm(x).mean(1))


def vit_no_final_norm(model, images):
    """Forgets the final LayerNorm."""
    x = _seq(model, images) + model.pos_embedding
    for block in model.blocks:
        x = block(x)
    return model.head(x[:, 0])


def vit_first_block_only(model, images):
    """Runs only the first block."""
    x = _seq(model, images) + model.pos_embedding
    x = model.blocks[0](x)
    return model.head(model.norm(x)[:, 0])


def vit_last_token(model, images):
    """Reads the last token instead of the class token."""
    x = _seq(model, images) + model.pos_embedding
    for block in model.blocks:
        x = block(x)
    return model.head(model.norm(x)[:, -1])


def vit_patch_size_4(model, images):
    """Hard-codes patch_size 4 (the visible model's) instead of model.patch_size."""
    x = _embed(model, images, P=4)
    x = torch.cat([model.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
    x = x + model.pos_embedding[:, :x.shape[1]]
    return _finish(model, x)


def vit_no_grad(model, images):
    """Right logits, computed under torch.no_grad(): the ViT cannot train."""
    with torch.no_grad():
        return _finish(model, _seq(model, images) + model.pos_embedding)


def vit_softmax(model, images):
    """Returns probabilities instead of logits."""
    return torch.softmax(_finish(model, _seq(model, images) + model.pos_embedding), dim=-1)


def vit_class_forward(model, images):
    """Gaming: calls the model's forward through its class."""
    return type(model).forward(model, images)


def vit_norm_before_blocks(model, images):
    """Applies the final norm before the blocks instead of after."""
    x = model.norm(_seq(model, images) + model.pos_embedding)
    for block in model.blocks:
        x = block(x)
    return model.head(x[:, 0])


def vit_one_image(model, images):
    """Runs image 0 only and repeats its logits over the batch."""
    x = _seq(model, images[:1]) + model.pos_embedding
    return _finish(model, x).expand(images.shape[0], -1)


WRONG_ANSWERS = {
    "vision_transformer_patchify": [patchify_plain_reshape, patchify_column_major, patchify_channel_last,
                                    patchify_square_grid, patchify_pixels_transposed, patchify_batch_one,
                                    patchify_tensor_unfold_wrong, patchify_captured_unfold, patchify_hardcoded_p, patchify_detached],
    # W only (768 * 768); b only; W once per patch; half a parameter; a string; a bool; nan (right: 590592)
    "vision_transformer_embedding_parameters": [589824, 768, 3 * 16 * 16 * 768 * 196, 590592.5, "590592",
                                                True, float("nan")],
    "vision_transformer_patch_embedding": [pe_no_transpose, pe_no_bias, pe_bias_before, pe_plain_reshape,
                                           pe_channel_last, pe_weight_reshaped, pe_captured_conv, pe_einsum_wrong, pe_no_grad, pe_fixed_patch],
    "vision_transformer_class_token": [cls_append, cls_no_expand, cls_add, cls_replace_first, cls_detached,
                                       cls_expand_wrong_axis, cls_first_example_only, cls_in_place],
    "vision_transformer_forward": [vit_no_cls_position, vit_positions_before_cls, vit_mean_pool, vit_no_final_norm,
                                   vit_first_block_only, vit_last_token, vit_softmax,
                                   vit_class_forward, vit_norm_before_blocks, vit_one_image, vit_patch_size_4, vit_no_grad],
}

# Wrong answers that still PASS the test cell. Left open on purpose: each returns float32 for
# float64 inputs, which the shared comparison accepts by design (Exercise.tolerances widens the
# tolerance for a float32 result, "a correct float32 answer must not fail"), and every tensor the
# notebook feeds these functions is float32 anyway.
HOLES = {
    'vision_transformer_patchify': [patchify_float32],
    'vision_transformer_class_token': [cls_float32],
}
