"""Cutting images into patches, the first step of a Vision Transformer.

Ground truth for notebook 09 (ViT).

A ViT reads an image as a sequence: it cuts the image into non-overlapping P x P patches,
flattens each patch into one vector, and treats the patches like the tokens of a sentence.
"""

__all__ = ["patchify"]


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
