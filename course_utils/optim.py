"""Adam, AdamW and a one-cycle learning rate for the course's models, without torch.optim.

Why: building any torch.optim optimiser imports TorchDynamo (its `add_param_group` and `step`
go through torch._disable_dynamo), which costs about 1.1 s of CPU the first time: more than the
training of most notebooks when a grader runs them, and paid again by every kernel (a student's,
each graded submission's, each test's). Each step also pays about 35 us of bookkeeping.

These classes run the arithmetic torch.optim runs in the course's case (CPU float32 parameters;
no amsgrad, maximize, capturable or differentiable), in the same order: the weights they train
are bit for bit those of torch.optim.Adam / AdamW and OneCycleLR, which tests/test_optim.py
checks step by step. `fused=True` calls the same fused kernel torch.optim calls; without it, the
update is torch.optim's single-tensor loop (the default on CPU).
"""
import math

import torch


class Adam:
    """torch.optim.Adam(params, lr, betas, eps, weight_decay, fused) for one group of parameters.
    `decoupled_weight_decay=True` is AdamW. `param_groups[0]["lr"]` and `["betas"]` may be
    changed between steps, as schedules do."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, fused=False,
                 decoupled_weight_decay=False):
        params = list(params)
        if not params:
            raise ValueError("Adam got an empty parameter list")
        if fused and any(p.device.type != "cpu" or not p.is_floating_point() for p in params):
            raise RuntimeError("the course's fused Adam takes CPU floating-point parameters only")
        self.param_groups = [{"params": params, "lr": lr, "betas": tuple(betas), "eps": eps,
                              "weight_decay": weight_decay}]
        self.fused = fused
        self.decoupled_weight_decay = decoupled_weight_decay
        self.state = {}  # parameter -> {"step", "exp_avg", "exp_avg_sq"}, made at its first step

    def zero_grad(self):
        """Forget the gradients (torch.optim's default, set_to_none=True)."""
        for p in self.param_groups[0]["params"]:
            p.grad = None

    @torch.no_grad()
    def step(self):
        group = self.param_groups[0]
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            return
        states = [self._state(p) for p in params]
        (beta1, beta2), lr, eps, decay = group["betas"], group["lr"], group["eps"], group["weight_decay"]
        steps = [s["step"] for s in states]
        exp_avgs = [s["exp_avg"] for s in states]
        exp_avg_sqs = [s["exp_avg_sq"] for s in states]
        if self.fused:
            torch._foreach_add_(steps, 1)
            fused = torch._fused_adamw_ if self.decoupled_weight_decay else torch._fused_adam_
            fused(params, [p.grad for p in params], exp_avgs, exp_avg_sqs, [], steps, amsgrad=False, lr=lr,
                  beta1=beta1, beta2=beta2, weight_decay=decay, eps=eps, maximize=False, grad_scale=None,
                  found_inf=None)
            return
        for param, exp_avg, exp_avg_sq, step_t in zip(params, exp_avgs, exp_avg_sqs, steps):
            grad = param.grad
            step_t += 1
            if decay != 0:
                if self.decoupled_weight_decay:
                    param.mul_(1 - lr * decay)
                else:
                    grad = grad.add(param, alpha=decay)
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            step = step_t.item()
            bias_correction1 = 1 - beta1 ** step
            bias_correction2 = 1 - beta2 ** step
            step_size = lr / bias_correction1
            bias_correction2_sqrt = bias_correction2 ** 0.5
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
            param.addcdiv_(exp_avg, denom, value=-step_size)

    def _state(self, param):
        state = self.state.get(param)
        if state is None:
            state = self.state[param] = {
                # torch.optim keeps the count as a float32 tensor (fused or not, on the CPU).
                "step": torch.zeros((), dtype=torch.float32) if self.fused else torch.tensor(0.0),
                "exp_avg": torch.zeros_like(param, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(param, memory_format=torch.preserve_format),
            }
        return state


def AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, fused=False):
    """torch.optim.AdamW: Adam with the weight decay applied to the weights, not the gradient."""
    return Adam(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, fused=fused,
                decoupled_weight_decay=True)


class OneCycle:
    """torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr, total_steps, pct_start) with its
    other defaults (cosine annealing, two phases, div_factor 25, final_div_factor 1e4, beta1
    cycled between 0.95 and 0.85): sets the optimiser's lr and beta1 for step 0 when made, and
    for the next step at each `step()`."""

    def __init__(self, optimizer, max_lr, total_steps, pct_start=0.3, div_factor=25.0,
                 final_div_factor=1e4, base_momentum=0.85, max_momentum=0.95):
        if total_steps <= 0 or not isinstance(total_steps, int):
            raise ValueError(f"total_steps must be a positive integer, not {total_steps!r}")
        self.optimizer = optimizer
        self.total_steps = total_steps
        initial_lr = max_lr / div_factor
        self._values = {"initial_lr": initial_lr, "max_lr": max_lr,
                        "min_lr": initial_lr / final_div_factor,
                        "max_momentum": max_momentum, "base_momentum": base_momentum}
        self._phases = [
            (float(pct_start * total_steps) - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
            (total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
        ]
        self.last_step = -1
        self.step()

    @staticmethod
    def _annealing_cos(start, end, pct):
        cos_out = math.cos(math.pi * pct) + 1
        return end + (start - end) / 2.0 * cos_out

    def step(self):
        self.last_step += 1
        if self.last_step > self.total_steps:
            raise ValueError(f"Tried to step {self.last_step} times. The specified number of total "
                             f"steps is {self.total_steps}")
        start_step = 0.0
        for i, (end_step, start_lr, end_lr, start_momentum, end_momentum) in enumerate(self._phases):
            if self.last_step <= end_step or i == len(self._phases) - 1:
                pct = (self.last_step - start_step) / (end_step - start_step)
                lr = self._annealing_cos(self._values[start_lr], self._values[end_lr], pct)
                momentum = self._annealing_cos(self._values[start_momentum], self._values[end_momentum], pct)
                break
            start_step = end_step
        group = self.optimizer.param_groups[0]
        group["betas"] = (momentum, *group["betas"][1:])
        group["lr"] = lr
