"""Reference answers of notebook 09 (Vision Transformer): the ground truth its exercises are
checked against.

A ViT reads an image as a sequence: it cuts the image into non-overlapping P x P patches,
flattens each patch into one vector, and treats the patches like the tokens of a sentence.

Instructor side. Shapes: images (B, C, H, W); P = patch_size; N = (H // P) * (W // P) patches;
tokens (B, N, d_model).
"""
import torch

__all__ = ["patchify", "patch_embedding", "prepend_class_token", "vit_forward", "VIT_B16",
           "patch_embedding_parameters"]

# ViT-B/16 of the ViT paper, the model of notebook 09's think-first question.
VIT_B16 = {"image_size": 224, "channels": 3, "patch_size": 16, "d_model": 768}


def patchify(images, patch_size):
    """Cut images into non-overlapping square patches and flatten each patch.

    Shape of images: (batch_size, C, H, W)
    Returns shape (batch_size, N, C * P * P) with P = patch_size and N = (H // P) * (W // P).

    Patches come in row-major order (left to right along the top row of patches, then the next
    row down). Each patch is flattened channel-first: all P * P pixels of channel 0 (row by
    row), then channel 1, and so on. This is exactly
    ``F.unfold(images, P, stride=P).transpose(1, 2)``.

    Raises ValueError if H or W is not divisible by P.
    """
    if images.dim() != 4:
        raise ValueError(f"images must be (batch_size, C, H, W), got shape {tuple(images.shape)}")
    P = patch_size
    if int(P) != P or P < 1:
        raise ValueError(f"patch_size must be a positive integer, got {patch_size}")
    B, C, H, W = images.shape
    if H % P or W % P:
        raise ValueError(
            f"image size {H} x {W} (H x W) is not divisible by patch_size {P}: "
            "crop or pad the images first"
        )
    rows, cols = H // P, W // P
    # Split each spatial axis into (patch index, pixel within patch):
    # (B, C, H, W) -> (B, C, rows, P, cols, P)
    x = images.reshape(B, C, rows, P, cols, P)
    # Bring the patch indices forward (row-major: rows before cols) and keep
    # (channel, pixel row, pixel col) together inside each patch:
    # -> (B, rows, cols, C, P, P)
    x = x.permute(0, 2, 4, 1, 3, 5)
    # Shape: (B, N = rows * cols, C * P * P)
    return x.reshape(B, rows * cols, C * P * P)



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
    """Logits (B, num_classes) of a course_utils.models.vit_model.TinyViT, computed from its parts."""
    x = patch_embedding(images, model.patch_embed.weight, model.patch_embed.bias, model.patch_size)
    x = prepend_class_token(x, model.cls_token)
    x = x + model.pos_embedding
    for block in model.blocks:
        x = block(x)
    x = model.norm(x)
    return model.head(x[:, 0])


def patch_embedding_parameters(channels=VIT_B16["channels"], patch_size=VIT_B16["patch_size"],
                               d_model=VIT_B16["d_model"]):
    """Learned numbers of a ViT's patch embedding z_i = W p_i + b: W is (d_model, C * P * P) and b
    (d_model,), one pair shared by every patch, so the image size and the number of patches do not
    enter. For ViT-B/16, 768 * 768 + 768 = 590,592."""
    return d_model * channels * patch_size * patch_size + d_model
