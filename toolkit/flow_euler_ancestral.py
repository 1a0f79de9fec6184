"""Euler ancestral on flow matching: the sampler ComfyUI and Forge run for "Euler a" on a flow model.

diffusers has no such scheduler: `FlowMatchEulerDiscreteScheduler(stochastic_sampling=True)` jumps to the
predicted clean sample and re-noises it fully to the next sigma, which is LCM's step (diffusers'
`FlowMatchLCMScheduler` does the same; toolkit/samplers.py serves it as "LCM"). Euler ancestral steps
down to a smaller sigma along the flow, then adds just enough fresh noise to reach the next sigma
(k-diffusion's `sample_euler_ancestral_RF` in ComfyUI, eta 1):

    sigma_down = sigma_next**2 / sigma
    x' = (sigma_down / sigma) * x + (1 - sigma_down / sigma) * x0
    x_next = (1 - sigma_next) / (1 - sigma_down) * x' + renoise * noise,
    renoise = sqrt(sigma_next**2 - sigma_down**2 * (1 - sigma_next)**2 / (1 - sigma_down)**2)

so x_next is again (1 - sigma_next) * x0 + sigma_next * (unit noise), as the flow's marginals require.
The schedule (shift, dynamic shifting, sigmas and mu the pipeline passes) is its parent's.
"""
import torch
from diffusers import FlowMatchEulerDiscreteScheduler
from diffusers.schedulers.scheduling_flow_match_euler_discrete import FlowMatchEulerDiscreteSchedulerOutput
from diffusers.utils.torch_utils import randn_tensor


class FlowMatchEulerAncestralScheduler(FlowMatchEulerDiscreteScheduler):
    def step(self, model_output, timestep, sample, s_churn: float = 0.0, s_tmin: float = 0.0,
             s_tmax: float = float("inf"), s_noise: float = 1.0, generator=None, per_token_timesteps=None,
             return_dict: bool = True):
        if per_token_timesteps is not None:
            raise ValueError("Euler ancestral takes one timestep per sample, not per-token timesteps")
        if isinstance(timestep, (int, torch.IntTensor, torch.LongTensor)):
            raise ValueError("pass one of `scheduler.timesteps` as the timestep, not an index")
        if self.step_index is None:
            self._init_step_index(timestep)
        sample = sample.to(torch.float32)                  # the parent upcasts the same way
        sigma, sigma_next = self.sigmas[self.step_index], self.sigmas[self.step_index + 1]
        x0 = sample - sigma * model_output
        if sigma_next == 0:
            prev_sample = x0
        else:
            sigma_down = sigma_next ** 2 / sigma
            alpha_next, alpha_down = 1 - sigma_next, 1 - sigma_down
            renoise = (sigma_next ** 2 - sigma_down ** 2 * alpha_next ** 2 / alpha_down ** 2).clamp(min=0) ** 0.5
            ratio = sigma_down / sigma
            prev_sample = ratio * sample + (1 - ratio) * x0
            noise = randn_tensor(sample.shape, generator=generator, device=sample.device, dtype=sample.dtype)
            prev_sample = (alpha_next / alpha_down) * prev_sample + noise * s_noise * renoise
        self._step_index += 1
        prev_sample = prev_sample.to(model_output.dtype)
        if not return_dict:
            return (prev_sample,)
        return FlowMatchEulerDiscreteSchedulerOutput(prev_sample=prev_sample)
