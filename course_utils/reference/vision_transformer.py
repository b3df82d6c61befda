"""Reference answers of notebook 09 (Vision Transformer) beyond `vit.patchify`.

Instructor side. Shapes: images (B, C, H, W); P = patch_size; N = (H // P) * (W // P) patches;
tokens (B, N, d_model).
"""
import torch

from .vit import patchify

__all__ = ["patchify", "patch_embedding", "prepend_class_token", "vit_forward"]


def patch_embedding(images, weight, bias, patch_size):
    """Every flattened patch through one linear map: (B, C, H, W) -> (B, N, d_model).

    weight has the nn.Linear layout (d_model, C * P * P), bias (d_model,) or None.
    """
    patches = patchify(images, patch_size)  # (B, N, C*P*P)
    tokens = patches @ weight.transpose(0, 1)
    return tokens if bias is None else tokens + bias


def prepend_class_token(tokens, cls_token):
    """Put the learned class token in front of every sequence: (B, N, d) -> (B, N + 1, d).

    cls_token has shape (1, 1, d); the same token starts every example of the batch.
    """
    cls = cls_token.expand(tokens.shape[0], 1, tokens.shape[-1])
    return torch.cat([cls, tokens], dim=1)


def vit_forward(model, images):
    """Logits (B, num_classes) of a course_utils.vit_model.TinyViT, computed from its parts."""
    x = patch_embedding(images, model.patch_embed.weight, model.patch_embed.bias, model.patch_size)
    x = prepend_class_token(x, model.cls_token)
    x = x + model.pos_embedding
    for block in model.blocks:
        x = block(x)
    x = model.norm(x)
    return model.head(x[:, 0])
