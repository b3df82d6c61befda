"""Mistake catalogue of notebook 09 (Vision Transformer).

Instructor side, as secret as the reference. Every `compute` is written out here with the
exercise's signature (never calling `course_utils.reference`), so the mutation tests can feed
it to the notebook's test cells as if a student wrote it.

Why the cases look the way they do:

* patchify: grids of patches that are not square (2 x 3, 3 x 2) so that column-major order is
  not a mere transpose of the same numbers, and C > 1 in most cases so that flattening the
  channels last differs from flattening them first (with C = 1 the two agree).
* patch_embedding: every case has d_model = C * P * P, so that `patches @ weight` (the weight
  not transposed) runs instead of raising, and a bias far from zero.
* prepend_class_token: batch sizes > 1, so the class token must be expanded over the batch.
* vit_forward: small TinyViTs in float64 whose class token and position embeddings are
  redrawn with a large scale, so that leaving out or shifting them changes the logits clearly.
"""
import torch
from torch.nn import functional as F

from course_utils.grading import CONV_BUILTINS, UNFOLD_BUILTINS, probe
from course_utils.reference import mistakes as framework
from course_utils.reference.mistakes import diagnose as _diagnose
from course_utils.reference import vision_transformer as reference
from course_utils.reference.mistakes import Exercise, Mistake, ValueExercise
from course_utils.reference.mistakes.gradients import GradientExercise

__all__ = ["EXERCISES", "HIDDEN_ONLY", "check"]

# Every catalogued mistake also fails the visible tests, except the wrong numbers of the think-first
# question: its visible test only checks that the answer is a positive number (the number is the question).
HIDDEN_ONLY = {"embedding_no_bias", "embedding_per_patch", "embedding_one_channel", "embedding_patch_side",
               "embedding_whole_image", "embedding_token_numbers", "embedding_with_class_and_positions"}

FORWARD_BUILTINS = ("course_utils.models.vit_model:run_vit",)


# --------------------------------------------------------------------------- 1. patchify

def patchify_cases(seed):
    g = torch.Generator().manual_seed(seed)
    return [
        ((torch.randn(2, 3, 8, 12, generator=g, dtype=torch.float64), 4), {}),
        ((torch.randn(1, 2, 9, 6, generator=g, dtype=torch.float64), 3), {}),
        ((torch.randn(3, 1, 4, 6, generator=g, dtype=torch.float64), 2), {}),
        ((torch.randn(2, 3, 4, 4, generator=g, dtype=torch.float64), 2), {}),
        # the smallest the prompt allows (issue 39, item 3): one image, one channel, one patch; P = 1
        ((torch.randn(1, 1, 3, 3, generator=g, dtype=torch.float64), 3), {}),
        ((torch.randn(1, 2, 2, 3, generator=g, dtype=torch.float64), 1), {}),
        # float16 images, which the prompt does not rule out (issue 39, item 2)
        ((torch.randn(2, 2, 4, 6, generator=g).half(), 2), {}),
    ]


def _patchify_variant(order):
    """order: the permutation of (B, C, rows, P_row, cols, P_col) axes before the final reshape."""
    def compute(images, patch_size):
        B, C, H, W = images.shape
        P = patch_size
        rows, cols = H // P, W // P
        if order is None:  # a plain reshape, no patches cut
            return images.reshape(B, rows * cols, C * P * P)
        x = images.reshape(B, C, rows, P, cols, P).permute(*order)
        return x.reshape(B, rows * cols, C * P * P)
    return compute


def _patchify_with_unfold_module(images, patch_size):
    """What the exercise forbids, under another name than F.unfold: the nn.Unfold module."""
    return torch.nn.Unfold(kernel_size=patch_size, stride=patch_size)(images).transpose(1, 2)


PATCHIFY_MISTAKES = (
    Mistake(
        "column_major",
        "your patches come in column-major order (down the first column of patches, then the next "
        "column); the order is row-major: left to right along the top row of patches, then the "
        "next row down.",
        _patchify_variant((0, 4, 2, 1, 3, 5)),
    ),
    Mistake(
        "channels_last",
        "you flattened each patch with the channels last (pixel by pixel, all channels of a pixel "
        "together); the layout is channel-first: all P*P pixels of channel 0, then channel 1, ... "
        "(permute to (B, rows, cols, C, P, P) before the reshape).",
        _patchify_variant((0, 2, 4, 3, 5, 1)),
    ),
    Mistake(
        "plain_reshape",
        "you reshaped the image straight to (B, N, C*P*P): that cuts the pixels in memory order "
        "(whole image rows), not into P x P squares. Reshape to (B, C, H/P, P, W/P, P), permute, "
        "then reshape.",
        _patchify_variant(None),
    ),
    Mistake(
        "pixels_column_major",
        "inside each patch you flattened the pixels column by column; flatten them row by row "
        "(the pixel-row axis before the pixel-column axis), as F.unfold does.",
        _patchify_variant((0, 2, 4, 1, 5, 3)),
    ),
    Mistake(
        "unfold_module",
        "Your code uses torch.nn.Unfold",
        _patchify_with_unfold_module,
    ),
)


# --------------------------------------------------------------------------- 2. patch_embedding

def patch_embedding_cases(seed):
    g = torch.Generator().manual_seed(seed)
    cases = []
    # (4 channels, P = 2): C*P*P = 16 is a square, so a P read off the weight as sqrt(C*P*P) shows.
    for B, C, H, W, P in [(2, 1, 8, 12, 4), (2, 3, 4, 6, 2), (1, 2, 6, 9, 3), (2, 4, 4, 6, 2)]:
        d = C * P * P
        images = torch.randn(B, C, H, W, generator=g, dtype=torch.float64)
        weight = torch.randn(d, d, generator=g, dtype=torch.float64) / d ** 0.5
        bias = 1.0 + torch.randn(d, generator=g, dtype=torch.float64)
        cases.append(((images, weight, bias, P), {}))
    # the smallest the prompt allows (issue 39, item 3): one image of one patch, one channel
    images = torch.randn(1, 1, 2, 2, generator=g, dtype=torch.float64)
    weight = torch.randn(3, 4, generator=g, dtype=torch.float64)
    cases.append(((images, weight, torch.randn(3, generator=g, dtype=torch.float64), 2), {}))
    # float16, which the prompt does not rule out (issue 39, item 2)
    images = torch.randn(2, 3, 4, 6, generator=g).half()
    weight = (torch.randn(5, 12, generator=g) / 12 ** 0.5).half()
    cases.append(((images, weight, torch.randn(5, generator=g).half(), 2), {}))
    return cases


def _cut(images, P, order=(0, 2, 4, 1, 3, 5)):
    B, C, H, W = images.shape
    rows, cols = H // P, W // P
    x = images.reshape(B, C, rows, P, cols, P).permute(*order)
    return x.reshape(B, rows * cols, C * P * P)


def _embedding_variant(kind):
    def compute(images, weight, bias, patch_size):
        P = patch_size
        if kind == "raw_reshape":
            B = images.shape[0]
            patches = images.reshape(B, -1, weight.shape[1])
        elif kind == "column_major":
            patches = _cut(images, P, order=(0, 4, 2, 1, 3, 5))
        else:
            patches = _cut(images, P)
        W = weight if kind == "not_transposed" else weight.transpose(0, 1)
        out = patches @ W
        return out if kind == "no_bias" else out + bias
    return compute


def _embedding_with_torch_conv2d(images, weight, bias, patch_size):
    """What the exercise forbids, under another name than F.conv2d: torch.conv2d (the same function)."""
    d_model, C = weight.shape[0], images.shape[1]
    kernel = weight.reshape(d_model, C, patch_size, patch_size)
    return torch.conv2d(images, kernel, bias, stride=patch_size).flatten(2).transpose(1, 2)


PATCH_EMBEDDING_MISTAKES = (
    Mistake(
        "no_bias",
        "you left out the bias: each token is patch @ weight.T + bias.",
        _embedding_variant("no_bias"),
    ),
    Mistake(
        "not_transposed",
        "you multiplied by the weight without transposing it: `weight` has the nn.Linear layout "
        "(d_model, C*P*P): transpose it for a product with the patches, which are (B, N, C*P*P).",
        _embedding_variant("not_transposed"),
    ),
    Mistake(
        "raw_reshape",
        "you reshaped the images straight to (B, N, C*P*P) instead of cutting them into patches: "
        "call your patchify first.",
        _embedding_variant("raw_reshape"),
    ),
    Mistake(
        "column_major",
        "your tokens come in column-major patch order: the patches must be in row-major order, "
        "as patchify returns them (check your patchify first).",
        _embedding_variant("column_major"),
    ),
    Mistake(
        "torch_conv2d",
        "Your code uses torch.conv2d",
        _embedding_with_torch_conv2d,
    ),
)


# --------------------------------------------------------------------------- 2b. think first: its size

def _embedding_size_mistakes(image_size, channels, patch_size, d_model):
    """The wrong counts of ViT-B/16's patch embedding that students reach, from its numbers."""
    patch = channels * patch_size * patch_size           # numbers in one flattened patch
    patches = (image_size // patch_size) ** 2            # N
    right = d_model * patch + d_model
    return (
        Mistake("embedding_no_bias", "you counted the weight matrix W but not the bias b, which adds one "
                                     "learned number per output feature.", d_model * patch),
        Mistake("embedding_per_patch", "you gave every patch a map of its own; one W and one b are shared by "
                                       "all N patches (that is why it is a convolution).", patches * right),
        Mistake("embedding_one_channel", "you flattened one colour channel of the patch; a flattened RGB patch "
                                         "holds the pixels of every one of its channels.",
                d_model * patch_size * patch_size + d_model),
        Mistake("embedding_patch_side", "you used the side P of a patch where a patch has P * P pixels in each "
                                        "channel.", d_model * channels * patch_size + d_model),
        Mistake("embedding_whole_image", "you mapped the whole image to a token; the map reads one P x P patch "
                                         "at a time.", d_model * channels * image_size * image_size + d_model),
        Mistake("embedding_token_numbers", "you counted the numbers in one image's tokens (N x d_model), "
                                           "which the map computes, not the learned numbers of the map itself.",
                patches * d_model),
        Mistake("embedding_with_class_and_positions", "you also counted the class token and the position "
                                                      "embeddings: they are learned too, but they are added "
                                                      "after the patch embedding, not part of it.",
                right + d_model + (patches + 1) * d_model),
    )


EMBEDDING_SIZE_MISTAKES = _embedding_size_mistakes(**reference.VIT_B16)


# --------------------------------------------------------------------------- 3. class token

def class_token_cases(seed):
    g = torch.Generator().manual_seed(seed)
    return [
        ((torch.randn(3, 4, 5, generator=g, dtype=torch.float64),
          torch.randn(1, 1, 5, generator=g, dtype=torch.float64)), {}),
        ((torch.randn(2, 6, 3, generator=g, dtype=torch.float64),
          torch.randn(1, 1, 3, generator=g, dtype=torch.float64)), {}),
        # the smallest the prompt allows (issue 39, item 3): one image of one patch, d = 1
        ((torch.randn(1, 1, 1, generator=g, dtype=torch.float64),
          torch.randn(1, 1, 1, generator=g, dtype=torch.float64)), {}),
        # float16 (issue 39, item 2)
        ((torch.randn(2, 3, 4, generator=g).half(), torch.randn(1, 1, 4, generator=g).half()), {}),
    ]


def _class_token_variant(kind):
    def compute(tokens, cls_token):
        if kind == "added":
            return tokens + cls_token
        cls = cls_token.expand(tokens.shape[0], -1, -1)
        return torch.cat([tokens, cls], dim=1)  # appended
    return compute


CLASS_TOKEN_MISTAKES = (
    Mistake(
        "added",
        "you added the class token to every patch token (shape (B, N, d)); it is a token of its "
        "own, prepended to the sequence: the result has N + 1 tokens, the class token first.",
        _class_token_variant("added"),
    ),
    Mistake(
        "appended",
        "you put the class token at the end of the sequence; it goes in front, at position 0 "
        "(the head reads x[:, 0] and position embedding 0 belongs to it).",
        _class_token_variant("appended"),
    ),
)


# --------------------------------------------------------------------------- 4. vit_forward

def forward_cases(seed):
    from course_utils.models.vit_model import TinyViT  # student-safe model, imported late on purpose

    g = torch.Generator().manual_seed(seed)
    cases = []
    for image_size, patch_size, channels, d_model, depth, heads, B in [
        (8, 4, 1, 8, 1, 2, 3), (12, 4, 2, 12, 2, 3, 2), (16, 4, 1, 16, 2, 4, 2),
        (8, 2, 1, 8, 1, 2, 2),  # patch size 2: a vit_forward that hard-codes 4 must fail
        (4, 4, 1, 4, 1, 1, 1),  # the smallest (issue 39, item 3): one image of one patch, one head
    ]:
        torch.manual_seed(seed + image_size)
        model = probe.portable(TinyViT, image_size=image_size, patch_size=patch_size, channels=channels,
                        d_model=d_model, depth=depth, num_heads=heads, num_classes=5).double()
        with torch.no_grad():
            model.cls_token.copy_(torch.randn(model.cls_token.shape, generator=g, dtype=torch.float64))
            model.pos_embedding.copy_(torch.randn(model.pos_embedding.shape, generator=g, dtype=torch.float64))
        model.eval()
        images = torch.rand(B, channels, image_size, image_size, generator=g, dtype=torch.float64)
        cases.append(((model, images), {}))
    return cases


def _forward_variant(kind):
    def compute(model, images):
        P = model.patch_size
        B, C, H, W = images.shape
        rows, cols = H // P, W // P
        patches = images.reshape(B, C, rows, P, cols, P).permute(0, 2, 4, 1, 3, 5).reshape(B, rows * cols, -1)
        x = patches @ model.patch_embed.weight.transpose(0, 1) + model.patch_embed.bias
        cls = model.cls_token.expand(B, -1, -1)
        pos = model.pos_embedding
        if kind == "pos_skips_class_slot":
            x = torch.cat([cls, x + pos[:, 1:]], dim=1)
        elif kind == "pos_before_class_token":
            x = torch.cat([cls, x + pos[:, : rows * cols]], dim=1)
        elif kind == "no_position":
            x = torch.cat([cls, x], dim=1)
        else:
            x = torch.cat([cls, x], dim=1) + pos
        for block in model.blocks:
            x = block(x)
        if kind != "no_final_norm":
            x = model.norm(x)
        if kind == "mean_pool":
            return model.head(x.mean(dim=1))
        if kind == "last_token":
            return model.head(x[:, -1])
        return model.head(x[:, 0])
    return compute


FORWARD_MISTAKES = (
    Mistake(
        "pos_skips_class_slot",
        "the class token gets no position embedding: add all N + 1 rows of pos_embedding after "
        "prepending the class token (row 0 is the class token's).",
        _forward_variant("pos_skips_class_slot"),
    ),
    Mistake(
        "pos_before_class_token",
        "you added the first N position embeddings to the patches before prepending the class "
        "token, so every patch got its left neighbour's position and the class token none: "
        "prepend first, then add all N + 1 rows of pos_embedding.",
        _forward_variant("pos_before_class_token"),
    ),
    Mistake(
        "no_position",
        "you left out the position embeddings (model.pos_embedding): without them the model "
        "cannot tell where a patch came from.",
        _forward_variant("no_position"),
    ),
    Mistake(
        "no_final_norm",
        "you skipped the final LayerNorm (model.norm) before the head: a pre-norm transformer "
        "normalises the output of its last block.",
        _forward_variant("no_final_norm"),
    ),
    Mistake(
        "mean_pool",
        "you averaged all tokens before the head; this ViT classifies from the class token alone, "
        "x[:, 0].",
        _forward_variant("mean_pool"),
    ),
    Mistake(
        "last_token",
        "you classified from the last token; the class token is the first, x[:, 0].",
        _forward_variant("last_token"),
    ),
)


_CRASH_HINTS = {
    "vision_transformer_patchify": "images is (B, C, H, W) with H and W multiples of patch_size, "
                                   "and any C, H != W allowed",
    "vision_transformer_patch_embedding": "weight has the nn.Linear layout (d_model, C*P*P) and bias "
                                          "(d_model,): the tokens are patchify(images, P) @ weight.T + bias",
    "vision_transformer_class_token": "tokens is (B, N, d) and cls_token (1, 1, d): expand the class "
                                      "token to (B, 1, d) before concatenating along dim=1",
    "vision_transformer_forward": "use model.patch_embed.weight and .bias, model.patch_size, "
                                  "model.cls_token, model.pos_embedding, model.blocks, model.norm "
                                  "and model.head",
}


EXERCISES = {
    exercise.grade_id: exercise
    for exercise in (
        GradientExercise(  # notebook 09 trains the ViT through it: a detached patchify must fail
            grade_id="vision_transformer_patchify",
            make_gradient_cases=lambda seed: patchify_cases(seed)[:2],
            function_name="patchify",
            reference=reference.patchify,
            make_cases=patchify_cases,
            mistakes=PATCHIFY_MISTAKES,
            forbidden=UNFOLD_BUILTINS + ("course_utils.grading.parts:patchify",),
            output_names=("your patches",),
            atol=1e-12,
            rtol=1e-12,
            crash_hint=_CRASH_HINTS["vision_transformer_patchify"],
        ),
        GradientExercise(  # notebook 09 trains the ViT through it
            grade_id="vision_transformer_patch_embedding",
            make_gradient_cases=lambda seed: patch_embedding_cases(seed)[:2],
            function_name="patch_embedding",
            reference=reference.patch_embedding,
            make_cases=patch_embedding_cases,
            mistakes=PATCH_EMBEDDING_MISTAKES,
            forbidden=UNFOLD_BUILTINS + CONV_BUILTINS + ("course_utils.grading.parts:patch_embedding",),
            earlier=("patchify",),  # its prompt: "use your patchify and a matrix product"
            output_names=("your tokens",),
            atol=1e-9,
            rtol=1e-7,
            crash_hint=_CRASH_HINTS["vision_transformer_patch_embedding"],
        ),
        ValueExercise(
            grade_id="vision_transformer_embedding_parameters",
            function_name="embedding_parameters",
            reference=reference.patch_embedding_parameters(),
            make_cases=lambda seed: [((), {})],
            mistakes=EMBEDDING_SIZE_MISTAKES,
            output_names=("your number of learned numbers",),
            atol=0.0,
            rtol=0.0,
        ),
        GradientExercise(  # notebook 09 trains the ViT through it
            grade_id="vision_transformer_class_token",
            make_gradient_cases=lambda seed: class_token_cases(seed)[:2],
            function_name="prepend_class_token",
            reference=reference.prepend_class_token,
            make_cases=class_token_cases,
            mistakes=CLASS_TOKEN_MISTAKES,
            forbidden=("course_utils.grading.parts:prepend_class_token",),
            output_names=("your sequence",),
            atol=1e-12,
            rtol=1e-12,
            crash_hint=_CRASH_HINTS["vision_transformer_class_token"],
        ),
        GradientExercise(  # notebook 09 trains the ViT through it: a forward under no_grad must fail
            grade_id="vision_transformer_forward",
            make_gradient_cases=lambda seed: forward_cases(seed)[:1],
            function_name="vit_forward",
            reference=reference.vit_forward,
            make_cases=forward_cases,
            mistakes=FORWARD_MISTAKES,
            forbidden=FORWARD_BUILTINS,
            earlier=("patchify", "patch_embedding", "prepend_class_token"),  # "use your three functions"
            output_names=("your logits",),
            atol=1e-8,
            rtol=1e-6,
            crash_hint=_CRASH_HINTS["vision_transformer_forward"],
        ),
    )
}


def check(grade_id, student_fn):
    """The hidden test of one exercise: GradingError naming the mistake, or None when right."""
    return framework.check(EXERCISES, grade_id, student_fn)


def diagnose(grade_id, fn):
    """Raise GradingError if `fn` crashes, breaks a rule or makes a catalogued mistake; silent on an
    uncatalogued wrong answer, which the test cell's last hidden line (`check`) then fails."""
    return _diagnose(EXERCISES, grade_id, fn)
