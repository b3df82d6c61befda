"""Second correct implementations of notebook 09's exercises, written differently from the
reference (course_utils/reference/vision_transformer.py): the exercise's tests must
pass them too (tests/exercises/test_mutations.py)."""
import numpy as np
import torch


def patchify_tensor_unfold(images, patch_size):
    """Tensor.unfold slides a window along one axis at a time: (B, C, rows, cols, P, P)."""
    P = patch_size
    B, C = images.shape[:2]
    windows = images.unfold(2, P, P).unfold(3, P, P)
    return windows.permute(0, 2, 3, 1, 4, 5).reshape(B, -1, C * P * P)


def patchify_loop(images, patch_size):
    """Slice every patch out in reading order and stack them."""
    P = patch_size
    B, C, H, W = images.shape
    patches = [images[:, :, r:r + P, c:c + P].reshape(B, -1)
               for r in range(0, H, P) for c in range(0, W, P)]
    return torch.stack(patches, dim=1)


def patch_embedding_einsum(images, weight, bias, patch_size):
    """The patches from Tensor.unfold, the linear map with einsum over (channel, row, column)."""
    P = patch_size
    d_model, B, C = weight.shape[0], images.shape[0], images.shape[1]
    windows = images.unfold(2, P, P).unfold(3, P, P)          # (B, C, rows, cols, P, P)
    kernel = weight.reshape(d_model, C, P, P)
    tokens = torch.einsum("bcrsuv,dcuv->brsd", windows, kernel)
    return tokens.reshape(B, -1, d_model) + bias


def patch_embedding_linear(images, weight, bias, patch_size):
    """torch.nn.functional.linear on the patches of a slicing loop."""
    return torch.nn.functional.linear(patchify_loop(images, patch_size), weight, bias)


def prepend_class_token_repeat(tokens, cls_token):
    """Copy the class token for every example, then concatenate."""
    return torch.cat((cls_token.repeat(tokens.shape[0], 1, 1), tokens), dim=1)


def prepend_class_token_fill(tokens, cls_token):
    """Make the (B, N + 1, d) tensor and fill its two parts (out of place, so autograd still works)."""
    B, N, d = tokens.shape
    start = torch.zeros(B, N + 1, d, dtype=tokens.dtype)
    first = torch.zeros(1, N + 1, 1, dtype=tokens.dtype)
    first[0, 0, 0] = 1.0
    padded = torch.nn.functional.pad(tokens, (0, 0, 1, 0))
    return start + padded + first * cls_token


def vit_forward_inline(model, images):
    """Everything inline: patches by slicing, einsum embedding, the class token by repeat, positions added
    afterwards, the class token read out before the head."""
    P = model.patch_size
    B, C, H, W = images.shape
    patches = torch.stack([images[:, :, r:r + P, c:c + P].flatten(1)
                           for r in range(0, H, P) for c in range(0, W, P)], dim=1)
    x = torch.einsum("bnp,dp->bnd", patches, model.patch_embed.weight) + model.patch_embed.bias
    x = torch.cat([model.cls_token.repeat(B, 1, 1), x], dim=1)
    x = x + model.pos_embedding.expand(B, -1, -1)
    for block in model.blocks:
        x = block(x)
    cls = x[:, 0]
    return model.head(model.norm(cls))  # LayerNorm is per token: normalising only x[:, 0] is the same


ALTERNATIVES = {
    "vision_transformer_patchify": [patchify_tensor_unfold, patchify_loop],
    "vision_transformer_patch_embedding": [patch_embedding_einsum, patch_embedding_linear],
    "vision_transformer_embedding_parameters": [590592, 590592.0, 768 * 768 + 768, 3 * 16 * 16 * 768 + 768,
                                                (3 * 16 * 16 + 1) * 768,
                                                np.prod([3, 16, 16, 768]) + 768],  # NumPy numbers too
    "vision_transformer_class_token": [prepend_class_token_repeat, prepend_class_token_fill],
    "vision_transformer_forward": [vit_forward_inline],
}
